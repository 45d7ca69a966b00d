"""``RemoveMixedTypeOperators`` (ExecuTorch's ``exir.passes.remove_mixed_type_operators``):
the operands of ``add``/``sub``/``mul``/``div``/``minimum`` are cast to the dtype the
operator computes in (torch's elementwise type promotion), so every operand has the result's
dtype: ``x_float + i_int`` becomes ``x + _to_copy(i, dtype=float32)`` and the lifted
``1`` of ``x + 1`` (an int64 0-d tensor) is cast to ``x``'s dtype. ``to_edge`` runs it right
after lifting scalars, before layout ops become dim-order ops, as ExecuTorch does."""

from __future__ import annotations

import torch
from torch._ops import OpOverload
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..node_meta import copy_provenance

_KIND = ELEMENTWISE_TYPE_PROMOTION_KIND
# ExecuTorch's allow list; div without a rounding mode is true division (ints become float).
_PROMOTION = {
    torch.ops.aten.add.Tensor: _KIND.DEFAULT,
    torch.ops.aten.mul.Tensor: _KIND.DEFAULT,
    torch.ops.aten.sub.Tensor: _KIND.DEFAULT,
    torch.ops.aten.div.Tensor: _KIND.INT_TO_FLOAT,
    torch.ops.aten.div.Tensor_mode: _KIND.DEFAULT,
    torch.ops.aten.minimum.default: _KIND.DEFAULT,
}


def _type_example(arg: object) -> object:
    """What torch's promotion sees for an operand (a tensor keeps its rank: 0-d tensors
    promote like scalars against dimensioned ones)."""
    if isinstance(arg, torch.fx.Node):
        val = arg.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            kind = {torch.SymInt: 0, torch.SymFloat: 0.0, torch.SymBool: False}[type(val)]
            return torch.tensor(kind)
        return val
    return arg


def _promotion_kind(node: torch.fx.Node) -> _KIND | None:
    kind = _PROMOTION.get(node.target)  # type: ignore[call-overload]
    if node.target == torch.ops.aten.div.Tensor_mode and node.kwargs.get("rounding_mode") is None:
        kind = _KIND.INT_TO_FLOAT
    return kind


def _cast_operands(node: torch.fx.Node) -> bool:
    kind = _promotion_kind(node)
    if kind is None or len(node.args) <= 1:
        return False
    examples = [_type_example(a) for a in node.args]
    if any(e is None for e in examples):
        return False
    dtype = elementwise_dtypes(*examples, type_promotion_kind=kind)[1]
    changed = False
    schema = node.target._schema  # type: ignore[union-attr]
    args, kwargs = list(node.args), dict(node.kwargs)
    for i, arg in enumerate(schema.arguments):
        if not isinstance(arg.type, torch.TensorType):
            continue
        if arg.name in kwargs:
            container, key = kwargs, arg.name
        elif not arg.kwarg_only and i < len(args):
            container, key = args, i
        else:
            continue
        value = container[key]
        val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor) or val.dtype == dtype:
            continue
        with node.graph.inserting_before(node):
            cast = node.graph.call_function(torch.ops.aten._to_copy.default, (value,),
                                            {"dtype": dtype})
        cast.meta["val"] = val.to(dtype)
        copy_provenance(node, cast)
        container[key] = cast
        changed = True
    if changed:
        node.args, node.kwargs = tuple(args), kwargs
    return changed


def remove_mixed_type_operators(gm: torch.fx.GraphModule) -> bool:
    """Cast mixed operands in ``gm`` and its nested graphs; whether anything changed."""
    changed = False
    for mod in gm.modules():
        if not isinstance(mod, torch.fx.GraphModule):
            continue
        touched = False
        for node in list(mod.graph.nodes):
            if node.op == "call_function" and isinstance(node.target, OpOverload):
                touched |= _cast_operands(node)
        if touched:
            mod.recompile()
        changed |= touched
    return changed


class RemoveMixedTypeOperators(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module, remove_mixed_type_operators(graph_module))
