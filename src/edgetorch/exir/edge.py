"""ATen dialect -> Edge dialect: core-ATen decomposition and the rewrites ExecuTorch's Edge
dialect makes (views become copies, scalar arguments of Tensor operands become lifted 0-d
constants, mixed operands are cast, layout changes become dim-order ops, assertion nodes go), and last every operator becomes its Edge
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
from torch.fx.graph import _snake_case

from . import ops as _ops  # noqa: F401  (defines dim_order_ops)
from .config import EdgeCompileConfig
from .debug_handles import generate_debug_handles
from .dialects._ops import ops as exir_ops
from .dialects.edge._ops import EdgeOpOverload
from .pass_base import _renamed
from .passes.memory_format_ops_pass import layout_ops_to_dim_order_ops
from .passes.remove_graph_asserts_pass import ASSERT_OPS, remove_asserts
from .passes.remove_mixed_type_operators import remove_mixed_type_operators
from .passes.remove_noop_pass import remove_noops
from .passes.remove_unused_parameters_pass import remove_unused_parameters_pass
from .passes.rewrite import rewrite
from .passes.scalar_to_tensor_pass import lift_scalar_arguments

Pass = Callable[[ExportedProgram], bool]

# Operators that stay ATen in the Edge graph (as in ExecuTorch): symbolic-size ops the
# emitter turns into executorch_prim calls, and assertion-like ops.
_NOT_EDGE = {
    torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
    torch.ops.aten._local_scalar_dense.default, torch.ops.aten.sym_stride.int, torch.ops.aten.sym_storage_offset.default,
    torch.ops.aten.scalar_tensor.default, *ASSERT_OPS,
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
    """``aten.add.Tensor(x, 2)`` -> ``aten.add.Scalar(x, 2)`` for the scalars
    ``lift_scalar_arguments`` left: in nested graphs (``cond`` branches, ``map`` bodies;
    ExecuTorch keeps those as ``get_attr`` constants of the submodule, which edgetorch's
    emitter does not take) and on channels-last tensors in the top graph (lifted, they would
    not run in ExecuTorch's runtime)."""
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
    name_edge_nodes(ep)
    return changed


def edge_node_name(target: object) -> str | None:
    """ExecuTorch's name for a node calling ``target``: its Edge op name in snake case
    (``aten_convolution_default``), which delegation reports and ETRecords show."""
    if not isinstance(target, OpOverload):
        return None
    namespace, _, name = target._schema.name.partition("::")
    if namespace == "edgetorch_preserve":  # backend/preserve.py's stand-ins carry the name
        return name
    # torch.fx's own naming of a callable called "aten.add.Tensor": snake case, dots to "_"
    return _snake_case(f"{namespace}.{name}.{target._overloadname}").replace(".", "_")


def name_edge_nodes(ep: ExportedProgram) -> None:
    """Name operator nodes as ExecuTorch's Edge graphs name them, keeping the signature's
    output names in step. ExecuTorch's graphs come out of a re-trace: a node calling an
    operator is named after it (``aten_convolution_default``, ``getitem``) and a repeated name
    counts up in graph order with no gaps (``aten_convolution_default_1``), whatever names
    decomposition and dead code left. Other nodes keep their names."""
    for gm in _ops.graph_modules(ep.graph_module):
        namespace = torch.fx.graph._Namespace()
        bases = {}
        for node in gm.graph.nodes:
            if node.op == "call_function":
                bases[node] = ("getitem" if node.target is operator.getitem
                               else edge_node_name(node.target))
            if bases.get(node) is None:  # kept verbatim (a placeholder may be named "input")
                namespace.associate_name_with_obj(node.name, node)
                namespace._used_names.add(node.name)
        for node, base in bases.items():
            if base is not None:
                node.name = namespace.create_name(base, node)
        gm.graph._graph_namespace = namespace
        gm.recompile()
    outputs = ep.graph_module.graph.output_node().args[0]
    sig = ep.graph_signature
    sig.output_specs[:] = [_renamed(spec, out) for spec, out in zip(sig.output_specs, outputs)]


def cast_mixed_operands(ep: ExportedProgram) -> bool:
    """ExecuTorch's ``RemoveMixedTypeOperators``: operands of add/sub/mul/div/minimum are
    cast to the dtype the operator computes in."""
    return remove_mixed_type_operators(ep.graph_module)


# ExecuTorch's order: scalars are lifted, then mixed operands cast, then layout ops become
# dim-order ops (the casts are ``_to_copy`` nodes).
EDGE_PASSES: list[Pass] = [
    remove_asserts,
    views_to_copies,
    lift_scalar_arguments,
    scalars_to_scalar_overloads,
    remove_noops,
    cast_mixed_operands,
    layout_ops_to_dim_order_ops,
    sort_to_topk,
]


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
    for edge_pass in [*passes, to_edge_ops]:
        edge_pass(ep)
    for mod in list(_ops.graph_modules(ep.graph_module)):
        mod.graph.eliminate_dead_code(is_impure_node=_is_impure)
        mod.graph.lint()
        mod.recompile()
    name_edge_nodes(ep)  # again: dead code left gaps in the numbering
    output_values(ep.graph_module)
    generate_debug_handles(ep.graph_module)  # last, after dead code is gone, as ExecuTorch numbers them
    return ep


def output_values(gm: torch.fx.GraphModule) -> None:
    """The output node's ``meta["val"]``: its results' values, as ExecuTorch's Edge graphs
    carry them (each of its passes re-traces the graph, which records them)."""
    output = gm.graph.output_node()
    output.meta["val"] = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a
                          for a in output.args[0]]


def _is_impure(node: torch.fx.Node) -> bool:
    if node.op in ("placeholder", "output"):
        return True
    if node.op == "call_function" and node.target is operator.getitem:
        return False
    if node.op == "call_function" and isinstance(node.target, OpOverload):
        return node.target._schema.is_mutable
    return node.is_impure()
