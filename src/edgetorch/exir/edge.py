"""ATen dialect -> Edge dialect: core-ATen decomposition and the rewrites ExecuTorch's Edge
dialect makes (views become copies, layout changes become dim-order ops, scalar arguments
move to ``.Scalar`` overloads, assertion nodes go), and last every operator becomes its Edge
form (``exir_ops.edge.*``). Each rewrite is a pass ``ep -> bool`` (see ``exir/passes``);
``EDGE_PASSES`` lists them in order."""

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
from .debug_handles import generate_debug_handles
from .dialects._ops import ops as exir_ops
from .dialects.edge._ops import EdgeOpOverload
from .passes.remove_unused_parameters_pass import remove_unused_parameters_pass
from .passes.rewrite import erase, rewrite
from .tensor import dim_order_of

Pass = Callable[[ExportedProgram], bool]

_ASSERT_OPS = {
    torch.ops.aten._assert_scalar.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_async.msg,
}

# Operators that stay ATen in the Edge graph (as in ExecuTorch): symbolic-size ops the
# emitter turns into executorch_prim calls, and assertion-like ops.
_NOT_EDGE = {
    torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
    torch.ops.aten._local_scalar_dense.default, torch.ops.aten.sym_stride.int, torch.ops.aten.sym_storage_offset.default,
    torch.ops.aten.scalar_tensor.default, *_ASSERT_OPS,
}


def _op_nodes(gm: torch.fx.GraphModule):
    for mod in list(_ops.graph_modules(gm)):
        for node in list(mod.graph.nodes):
            if node.op == "call_function" and isinstance(node.target, OpOverload):
                yield node


def views_to_copies(ep: ExportedProgram) -> bool:
    """``aten.view`` -> ``aten.view_copy`` and so on: the portable runtime has no aliasing ops.

    (``to_executorch`` turns eligible ``view_copy`` back into a zero-copy view.)
    """
    changed = False
    for node in _op_nodes(ep.graph_module):
        copy_op = get_view_copy_of_view_op(node.target._schema)
        if copy_op is None and node.target == torch.ops.aten._unsafe_view.default:
            copy_op = torch.ops.aten.view_copy.default
        if copy_op is not None:
            node.target = copy_op
            changed = True
    return changed


def scalars_to_scalar_overloads(ep: ExportedProgram) -> bool:
    """``aten.add.Tensor(x, 2)`` -> ``aten.add.Scalar(x, 2)``."""
    changed = False
    for node in _op_nodes(ep.graph_module):
        args = node.target._schema.arguments
        if any(isinstance(args[i].type, torch.TensorType) and isinstance(a, (int, float, bool))
               for i, a in enumerate(node.args[1:len(args)], start=1)):
            alt = _ops.scalar_overload(node.target)
            if alt is not None:
                node.target = alt
                changed = True
    return changed


def _to_dim_order_op(node: torch.fx.Node) -> bool:
    kwargs = dict(node.kwargs)
    fmt = kwargs.pop("memory_format", None)
    val = node.meta.get("val")
    # The output's layout (what memory_format asked for, or what it preserved).
    explicit = fmt not in (None, torch.preserve_format)
    has_layout = isinstance(val, torch.Tensor) and (explicit or val.dim() > 0)
    kwargs["dim_order"] = list(dim_order_of(val)) if has_layout else None
    node.target = _DIM_ORDER_OPS[node.target]
    node.kwargs = kwargs
    return True


_DIM_ORDER_OPS = {
    torch.ops.aten._to_copy.default: torch.ops.dim_order_ops._to_dim_order_copy.default,
    torch.ops.aten.clone.default: torch.ops.dim_order_ops._clone_dim_order.default,
}


def layout_ops_to_dim_order_ops(ep: ExportedProgram) -> bool:
    """``_to_copy``/``clone`` -> ``dim_order_ops._to_dim_order_copy``/``_clone_dim_order``."""
    return rewrite(ep.graph_module, dict.fromkeys(_DIM_ORDER_OPS, _to_dim_order_op))


def remove_asserts(ep: ExportedProgram) -> bool:
    """Export's runtime-assertion nodes check nothing the runtime needs; drop them."""
    return rewrite(ep.graph_module, dict.fromkeys(_ASSERT_OPS, erase))


def remove_noops(ep: ExportedProgram) -> bool:
    """Drop ``aten.alias_copy`` (its output is its input)."""
    return rewrite(ep.graph_module, {
        torch.ops.aten.alias_copy.default: lambda node: erase(node, node.args[0])})


def _sort_as_topk(node: torch.fx.Node) -> bool:
    x = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)
    descending = node.args[2] if len(node.args) > 2 else node.kwargs.get("descending", False)
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or val.dim() == 0:
        return False
    size = val.shape[dim]
    if not isinstance(size, int):
        return False
    node.target = torch.ops.aten.topk.default
    node.args = (x, size, dim, bool(descending), True)
    node.kwargs = {}
    return True


def sort_to_topk(ep: ExportedProgram) -> bool:
    """``sort(x, dim, descending)`` -> ``topk(x, x.size(dim), dim, largest=descending)``.

    ExecuTorch's portable library has ``topk`` but no ``sort``; a non-stable sort is a full
    top-k (ties may come back in another order, which a non-stable sort allows), so programs
    that sort also run on ExecuTorch's runtime. Stable sorts and symbolic sizes are left alone.
    """
    return rewrite(ep.graph_module, {torch.ops.aten.sort.default: _sort_as_topk})


def as_edge_op(op: object) -> object:
    """The Edge form of ``op`` (itself when it stays ATen or is no operator overload)."""
    if not isinstance(op, OpOverload) or isinstance(op, EdgeOpOverload) or op in _NOT_EDGE:
        return op
    edge_ns = getattr(exir_ops.edge, op.namespace)
    return getattr(getattr(edge_ns, op._schema.name.split("::")[1]), op._overloadname)


def to_edge_ops(ep: ExportedProgram) -> bool:
    """Every ATen (and custom) operator -> its ``exir_ops.edge`` form, as ExecuTorch's
    ``to_edge`` does, so passes written against ``exir_ops.edge.*`` match."""
    changed = False
    for node in _op_nodes(ep.graph_module):
        edge = as_edge_op(node.target)
        if edge is not node.target:
            node.target = edge
            changed = True
    return changed


EDGE_PASSES: list[Pass] = [
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
    for node in list(ep.graph.nodes):  # the constants live in the top graph's placeholders
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        schema = node.target._schema
        args = list(node.args)
        before = list(args)
        for i, arg in enumerate(args):
            if i >= len(schema.arguments) or isinstance(arg, bool):
                continue
            if isinstance(schema.arguments[i].type, torch.TensorType) and isinstance(arg, (int, float)):
                value = torch.tensor(arg, dtype=_wrapped_number_dtype(arg, node.meta.get("val")))
                args[i] = add_constant(ep, f"_scalar_{node.name}_{i}", value, value, node)
                changed = True
        if args != before:
            node.args = tuple(args)
    if changed:
        ep.graph_module.recompile()
    return changed


_DEFAULT_TABLE: tuple[int, dict] | None = None  # (registered-operator count, materialized table)


def _default_table() -> dict:
    """torch's default decompositions, materialized once per set of registered operators.

    Building and materializing the table walks every CompositeImplicit operator of every
    namespace (about half a second, on every ``to_edge``); the result only changes when an
    operator is registered, which changes the dispatcher's operator count."""
    global _DEFAULT_TABLE
    registered = len(torch._C._dispatch_get_all_op_names())
    if _DEFAULT_TABLE is None or _DEFAULT_TABLE[0] != registered:
        _DEFAULT_TABLE = (registered, dict(torch.export.default_decompositions().materialize()))
    return dict(_DEFAULT_TABLE[1])


def _decomposition_table(config: EdgeCompileConfig, keep: list[OpOverload]):
    table = _default_table()
    for op in list(config.preserve_ops) + list(keep):
        table.pop(op, None)
    return table


def to_edge_dialect(
    ep: ExportedProgram, config: EdgeCompileConfig, keep: list[OpOverload] | None = None
) -> ExportedProgram:
    """Decompose ``ep`` to core ATen (keeping ``keep``) and apply the Edge rewrites."""
    ep = ep.run_decompositions(_decomposition_table(config, keep or []))
    remove_unused_parameters_pass(ep)  # on the decomposed copy: the caller's ep is untouched
    passes = [p for p in EDGE_PASSES
              if not (config._skip_dim_order and p is layout_ops_to_dim_order_ops)]
    for edge_pass in [*passes, scalars_to_tensors, to_edge_ops]:
        edge_pass(ep)
    for mod in list(_ops.graph_modules(ep.graph_module)):
        mod.graph.eliminate_dead_code(is_impure_node=_is_impure)
        mod.graph.lint()
        mod.recompile()
    generate_debug_handles(ep.graph_module)  # last, after dead code is gone, as ExecuTorch numbers them
    return ep


def _is_impure(node: torch.fx.Node) -> bool:
    if node.op in ("placeholder", "output"):
        return True
    if node.op == "call_function" and node.target is operator.getitem:
        return False
    if node.op == "call_function" and isinstance(node.target, OpOverload):
        return node.target._schema.is_mutable
    return node.is_impure()
