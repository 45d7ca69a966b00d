"""Graph rewrites ``OpenvinoBackend.preprocess`` runs before OpenVINO's PyTorch frontend sees
the subgraph (the same two ExecuTorch runs, written against the op names so they apply to
Edge and ATen targets alike)."""

from __future__ import annotations

import torch

aten = torch.ops.aten

_DIM_ORDER_TO_ATEN = {
    "dim_order_ops._to_dim_order_copy.default": aten._to_copy.default,
    "dim_order_ops._clone_dim_order.default": aten.clone.default,
}


def _name(target: object) -> str:
    return getattr(target, "__name__", str(target))


def revert_dim_order_ops(gm: torch.fx.GraphModule) -> bool:
    """``_to_dim_order_copy``/``_clone_dim_order`` back to ``_to_copy``/``clone``: OpenVINO's
    frontend knows the ATen ops only. A non-contiguous ``dim_order`` becomes the matching
    ``memory_format`` (channels-last for 4-D ``[0, 2, 3, 1]``)."""
    changed = False
    for node in list(gm.graph.nodes):
        new = _DIM_ORDER_TO_ATEN.get(_name(node.target)) if node.op == "call_function" else None
        if new is None:
            continue
        kwargs = dict(node.kwargs)
        dim_order = kwargs.pop("dim_order", None)
        if dim_order is not None and list(dim_order) == [0, 2, 3, 1]:
            kwargs["memory_format"] = torch.channels_last
        node.target, node.kwargs = new, kwargs
        changed = True
    if changed:
        gm.recompile()
    return changed


def decompose_floor_divide(gm: torch.fx.GraphModule) -> bool:
    """``div(a, b, rounding_mode="floor")`` -> ``floor(div(a, b))``.

    OpenVINO's frontend rounds that division toward zero; PyTorch rounds toward -inf. Integer
    operands go through float32 (OpenVINO's integer division truncates too) and back.
    """
    changed = False
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or _name(node.target) != "aten.div.Tensor_mode":
            continue
        if node.kwargs.get("rounding_mode") != "floor":
            continue
        a, b = node.args[:2]
        val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        integer = isinstance(val, torch.Tensor) and not val.dtype.is_floating_point
        with graph.inserting_before(node):
            if integer:
                a = graph.call_function(aten._to_copy.default, (a,), {"dtype": torch.float32})
                if isinstance(b, torch.fx.Node):
                    b = graph.call_function(aten._to_copy.default, (b,), {"dtype": torch.float32})
            div = graph.call_function(aten.div.Tensor, (a, b))
            result = graph.call_function(aten.floor.default, (div,))
            if integer:
                result = graph.call_function(aten._to_copy.default, (result,),
                                             {"dtype": val.dtype})
        result.meta = dict(node.meta)
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        gm.recompile()
    return changed
