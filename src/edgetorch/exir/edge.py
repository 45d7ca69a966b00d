"""ATen dialect -> Edge dialect: core-ATen decomposition and the rewrites ExecuTorch's Edge
dialect makes (views become copies, layout changes become dim-order ops, scalar arguments
move to ``.Scalar`` overloads, assertion nodes go). Each rewrite is a small function over the
graph that returns whether it changed anything; ``EDGE_PASSES`` lists them in order."""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch._export.passes.replace_view_ops_with_view_copy_ops_pass import (
    get_view_copy_of_view_op,
)
from torch._ops import OpOverload
from torch.export import ExportedProgram

from . import ops as _ops  # noqa: F401  (defines dim_order_ops)
from .config import EdgeCompileConfig
from .passes.remove_unused_parameters_pass import remove_unused_parameters_pass
from .tensor import dim_order_of

GraphRewrite = Callable[[torch.fx.GraphModule], bool]

_ASSERT_OPS = {
    torch.ops.aten._assert_scalar.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_async.msg,
}


def _op_nodes(gm: torch.fx.GraphModule):
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and isinstance(node.target, OpOverload):
            yield node


def views_to_copies(gm: torch.fx.GraphModule) -> bool:
    """``aten.view`` -> ``aten.view_copy`` and so on: the portable runtime has no aliasing ops.

    (``to_executorch`` turns eligible ``view_copy`` back into a zero-copy view.)
    """
    changed = False
    for node in _op_nodes(gm):
        copy_op = get_view_copy_of_view_op(node.target._schema)
        if copy_op is not None:
            node.target = copy_op
            changed = True
        elif node.target is torch.ops.aten._unsafe_view.default:
            node.target = torch.ops.aten.view_copy.default
            changed = True
    return changed


def scalars_to_scalar_overloads(gm: torch.fx.GraphModule) -> bool:
    """``aten.add.Tensor(x, 2)`` -> ``aten.add.Scalar(x, 2)``."""
    changed = False
    for node in _op_nodes(gm):
        schema = node.target._schema
        for i, arg in enumerate(node.args):
            if i == 0 or i >= len(schema.arguments):
                continue
            if isinstance(schema.arguments[i].type, torch.TensorType) and isinstance(
                arg, (int, float, bool)
            ):
                alt = _ops.scalar_overload(node.target)
                if alt is None:
                    continue
                node.target = alt
                changed = True
                break
    return changed


def layout_ops_to_dim_order_ops(gm: torch.fx.GraphModule) -> bool:
    """``_to_copy``/``clone`` -> ``dim_order_ops._to_dim_order_copy``/``_clone_dim_order``."""
    changed = False
    for node in _op_nodes(gm):
        if node.target not in (torch.ops.aten._to_copy.default, torch.ops.aten.clone.default):
            continue
        kwargs = dict(node.kwargs)
        fmt = kwargs.pop("memory_format", None)
        val = node.meta.get("val")
        # The output's layout (what memory_format asked for, or what it preserved).
        explicit = fmt not in (None, torch.preserve_format)
        has_layout = isinstance(val, torch.Tensor) and (explicit or val.dim() > 0)
        kwargs["dim_order"] = list(dim_order_of(val)) if has_layout else None
        if node.target is torch.ops.aten._to_copy.default:
            node.target = torch.ops.dim_order_ops._to_dim_order_copy.default
        else:
            node.target = torch.ops.dim_order_ops._clone_dim_order.default
        node.kwargs = kwargs
        changed = True
    return changed


def remove_asserts(gm: torch.fx.GraphModule) -> bool:
    """Export's runtime-assertion nodes check nothing the runtime needs; drop them."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ASSERT_OPS and not node.users:
            gm.graph.erase_node(node)
            changed = True
    return changed


def remove_noops(gm: torch.fx.GraphModule) -> bool:
    """Drop ``aten.alias_copy``/``clone`` with identical in/out and dead nodes."""
    changed = False
    for node in _op_nodes(gm):
        if node.target is torch.ops.aten.alias_copy.default:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            changed = True
    return changed


def sort_to_topk(gm: torch.fx.GraphModule) -> bool:
    """``sort(x, dim, descending)`` -> ``topk(x, x.size(dim), dim, largest=descending)``.

    ExecuTorch's portable library has ``topk`` but no ``sort``; a non-stable sort is a full
    top-k (ties may come back in another order, which a non-stable sort allows), so programs
    that sort also run on ExecuTorch's runtime. Stable sorts and symbolic sizes are left alone.
    """
    changed = False
    for node in _op_nodes(gm):
        if node.target is not torch.ops.aten.sort.default:
            continue
        x = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)
        descending = node.args[2] if len(node.args) > 2 else node.kwargs.get("descending", False)
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor) or val.dim() == 0:
            continue
        size = val.shape[dim]
        if not isinstance(size, int):
            continue
        node.target = torch.ops.aten.topk.default
        node.args = (x, size, dim, bool(descending), True)
        node.kwargs = {}
        changed = True
    return changed


EDGE_PASSES: list[GraphRewrite] = [
    remove_asserts,
    views_to_copies,
    scalars_to_scalar_overloads,
    layout_ops_to_dim_order_ops,
    sort_to_topk,
    remove_noops,
]


def _wrapped_number_dtype(number: int | float, result: object) -> torch.dtype:
    """A float joins a floating result in its dtype (torch's wrapped-number promotion);
    otherwise floats are float32 and ints int64."""
    if isinstance(number, float):
        if isinstance(result, torch.Tensor) and result.dtype.is_floating_point:
            return result.dtype
        return torch.float32
    return torch.int64


def scalars_to_tensors(ep: ExportedProgram) -> bool:
    """A Python number left in a Tensor argument (``1.0 - x`` exports as
    ``sub.Tensor(1.0, x)``) becomes a 0-d constant tensor, as ExecuTorch's ScalarToTensorPass
    does: kernels (ours and ExecuTorch's) read a Tensor there."""
    from .passes.constant_fold import add_constant

    changed = False
    for node in list(_op_nodes(ep.graph_module)):
        schema = node.target._schema
        args = list(node.args)
        before = list(args)
        for i, arg in enumerate(args):
            if i >= len(schema.arguments) or isinstance(arg, bool):
                continue
            if isinstance(schema.arguments[i].type, torch.TensorType) and isinstance(arg, (int, float)):
                value = torch.tensor(arg, dtype=_wrapped_number_dtype(arg, node.meta.get("val")))
                args[i] = add_constant(ep, f"_scalar_{node.name}_{i}", value, value)
                changed = True
        if args != before:
            node.args = tuple(args)
    if changed:
        ep.graph_module.recompile()
    return changed


def _decomposition_table(config: EdgeCompileConfig, keep: list[OpOverload]):
    table = torch.export.default_decompositions()
    for op in list(config.preserve_ops) + list(keep):
        table.pop(op, None)
    return table


def to_edge_dialect(
    ep: ExportedProgram, config: EdgeCompileConfig, keep: list[OpOverload] | None = None
) -> ExportedProgram:
    """Decompose ``ep`` to core ATen (keeping ``keep``) and apply the Edge rewrites."""
    ep = ep.run_decompositions(_decomposition_table(config, keep or []))
    remove_unused_parameters_pass(ep)  # on the decomposed copy: the caller's ep is untouched
    gm = ep.graph_module
    rewrites = EDGE_PASSES
    if config._skip_dim_order:
        rewrites = [r for r in rewrites if r is not layout_ops_to_dim_order_ops]
    for mod in list(_ops.graph_modules(gm)):
        for rewrite in rewrites:
            rewrite(mod)
    scalars_to_tensors(ep)
    for mod in list(_ops.graph_modules(gm)):
        mod.graph.eliminate_dead_code(is_impure_node=_is_impure)
        mod.graph.lint()
        mod.recompile()
    return ep


def _is_impure(node: torch.fx.Node) -> bool:
    if node.op in ("placeholder", "output"):
        return True
    if node.op == "call_function" and node.target is operator.getitem:
        return False
    if node.op == "call_function" and isinstance(node.target, OpOverload):
        return node.target._schema.is_mutable
    return node.is_impure()
