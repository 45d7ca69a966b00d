"""The two operator checks of export: the Edge dialect's, and the runtime's.

``to_edge`` (and every ``transform``) checks what ExecuTorch's Edge verifier checks: every call
is an operator, every ATen operator is in core ATen unless preserved or excepted, and every
Edge operator's dtypes follow ExecuTorch's Edge dialect rules. Operators of any other namespace
(custom ops) pass, as in ExecuTorch: a pass or a partitioner may still take them.

``to_executorch`` checks what ExecuTorch leaves to the runtime: every operator left outside
delegates has a kernel in edgetorch's registry, for its dtypes, so a ``.pte`` that the runtime
would refuse at load (ExecuTorch's with OperatorMissing) is refused on the developer's machine,
naming the op, the node, the user's source line and what to try. Operators the target runtime
provides from its own kernel library are listed in
``ExecutorchBackendConfig.target_runtime_operators`` and skip that check.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterable

import torch
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch.export import ExportedProgram

from ..errors import ErrorCode, ExportError, UnsupportedOperatorError
from ..kernels import KERNELS
from . import memory
from .dialects.edge._ops import EdgeOpOverload
from .dtype_support import check_edge_dtypes, check_kernel_dtypes
from .error import NonCoreOperatorError
from .ops import describe_node, graph_modules, out_variant, qualified_name
from .passes.executorch_prim_ops_registry import SYM_OPS
from .passes.to_out_variant import NO_OUT_VARIANT, is_inplace

# Calls that are no operator: a tuple's item, and the buffers and views ``to_executorch``
# inserts (a lowered program may be wrapped in a manager again).
_ALLOWED_CALLS = {operator.getitem, memory.alloc, memory.view}
_AUTO_FUNCTIONALIZED = ("auto_functionalized", "auto_functionalized_v2")

_aten = torch.ops.aten
# ATen operators ExecuTorch's Edge verifier lets through whatever their tags say (its own
# list: a few non-core ops its kernels cover, asserts, and the symbolic-size ops).
EXECUTORCH_EXCEPTIONS = frozenset({
    _aten.mkldnn_rnn_layer.default, _aten._upsample_bilinear2d_aa.default,
    _aten.quantize_per_tensor.default, _aten.dequantize.self, _aten.max.default,
    _aten.min.default, _aten.full_like.default, _aten._assert_scalar.default,
    _aten._assert_async.msg, _aten.scalar_tensor.default, _aten.sym_stride.int,
    _aten.sym_size.int, _aten.sym_numel.default, _aten._local_scalar_dense.default,
    _aten.sym_constrain_range_for_size.default, _aten.sym_constrain_range.default,
})


def aten_op(op: OpOverload) -> OpOverload:
    """The ATen overload an Edge overload stands for (``op`` itself otherwise)."""
    return op._op if isinstance(op, EdgeOpOverload) else op


def core_aten_problem(op: OpOverload, exceptions: Collection[object] = (),
                      preserved: Collection[object] = ()) -> str | None:
    """Why ExecuTorch's Edge verifier refuses ``op`` (an ATen or Edge overload), or None:
    an ATen operator outside core ATen that is neither excepted nor preserved, or a preserved
    view. Other namespaces always pass."""
    op = aten_op(op)  # an Edge op is checked as the ATen op it stands for
    if op.namespace != "aten" or op in EXECUTORCH_EXCEPTIONS or op in exceptions:
        return None
    if op in preserved:
        return (f"{op} cannot be preserved: it is a view, and memory planning needs views as "
                "copies" if op.is_view else None)
    if torch.Tag.core in op.tags or torch.Tag.view_copy in op.tags:
        return None
    return f"{qualified_name(op)} is not in the core ATen opset"


# ---- to_edge: ExecuTorch's Edge verifier --------------------------------------------------


def edge_reason(node: torch.fx.Node, exceptions: Collection[object] = (),
                preserved: Collection[object] = ()) -> str | None:
    """Why ExecuTorch's Edge verifier refuses ``node``, or None."""
    if node.op != "call_function":
        return None
    target = node.target
    if target in _ALLOWED_CALLS or target in SYM_OPS or isinstance(target, HigherOrderOperator):
        return None
    if not isinstance(target, OpOverload):
        return f"call to {getattr(target, '__name__', target)!r} is not an operator"
    return core_aten_problem(target, exceptions, preserved)


def verify_edge_program(ep: ExportedProgram, method: str = "forward",
                        exceptions: Collection[object] = (),
                        preserved: Collection[object] = ()) -> None:
    """Raise for the first node ExecuTorch's Edge verifier refuses (a non-core ATen operator:
    ``NonCoreOperatorError``, which is also torch's ``SpecViolationError``), else for the first
    node whose dtypes the Edge dialect rules forbid (``UnsupportedOperatorError``)."""
    nodes = _nodes(ep)
    problems = [(n, r) for n in nodes if (r := edge_reason(n, exceptions, preserved))]
    if problems:
        node, reason = problems[0]
        core = isinstance(node.target, OpOverload)
        raise (NonCoreOperatorError if core else UnsupportedOperatorError)(
            f"method {method!r}: {reason} (ExecuTorch's Edge dialect refuses it too).\n"
            f"  {describe_node(node)}{_more(problems, node)}\n  Try: " + (
                _non_core_hint(node.target) if core else
                "rewrite that line with torch operators; or pass "
                "EdgeCompileConfig(_check_ir_validity=False) to skip this check"))
    check_edge_dtypes(nodes, method, exceptions)


def _non_core_hint(op: OpOverload) -> str:
    aten = aten_op(op)
    return (f"export under torch.no_grad() (training export keeps some ops whole); or let it "
            "through with to_edge(..., compile_config=EdgeCompileConfig("
            f"_core_aten_ops_exception_list=[torch.ops.{aten}])) or preserve_ops=[...] when a "
            "backend or a kernel you register handles it (to_executorch checks that one does)")


# ---- to_executorch: can the runtime run it ------------------------------------------------


def _unwrapped(node: torch.fx.Node) -> torch.fx.Node:
    """A stand-in node calling the op that an ``auto_functionalized`` node wraps."""
    graph = torch.fx.Graph()
    return graph.call_function(node.args[0], (), {})


def _runtime_name(op: OpOverload) -> str | None:
    """The operator string the runtime must have for ``op``, or None when there is none."""
    if op in NO_OUT_VARIANT or is_inplace(op):  # called as themselves (scalars, write-backs)
        return qualified_name(op)
    out = out_variant(op)
    return qualified_name(out) if out is not None else None


def provided_names(ops: Iterable[object]) -> frozenset[str]:
    """``target_runtime_operators`` as operator strings: a string as given (``mylib::foo.out``,
    or ``mylib::foo`` for every overload), an overload as the name the ``.pte`` stores for it
    (its out variant's) and its own, a packet (``torch.ops.mylib.foo``) as ``mylib::foo``."""
    names = set()
    for op in ops:
        if isinstance(op, str):
            names.add(op)
        elif isinstance(op, OpOverloadPacket):
            names.add(op._qualified_op_name)
        elif isinstance(op, OpOverload):
            names.add(qualified_name(op))
            names.add(_runtime_name(op) or qualified_name(op))
        else:
            raise ExportError(f"ExecutorchBackendConfig.target_runtime_operators takes operator "
                              "names ('mylib::foo.out') or torch.ops overloads and packets, "
                              f"got {op!r}", code=ErrorCode.InvalidArgument)
    return frozenset(names)


def _provided(op: OpOverload, provided: frozenset[str]) -> bool:
    op = aten_op(op)
    name = qualified_name(op)
    return bool(provided) and (name in provided or op._schema.name in provided
                               or _runtime_name(op) in provided)


def unsupported_reason(node: torch.fx.Node, provided: frozenset[str] = frozenset()) -> str | None:
    """Why ``node`` cannot run in the runtime, or None if it can (or the target runtime
    provides its operator)."""
    if node.op != "call_function":
        return None
    target = node.target
    if target in _ALLOWED_CALLS or target in SYM_OPS:
        return None
    if isinstance(target, HigherOrderOperator):
        if target is torch.ops.higher_order.cond:
            return None
        if target is torch.ops.higher_order.map_impl:
            return map_reason(node)
        if target.__name__ == "executorch_call_delegate":
            return None
        if target.__name__ in _AUTO_FUNCTIONALIZED:  # a mutating custom op, made in place
            return unsupported_reason(_unwrapped(node), provided)  # by to_executorch
        return f"higher-order operator {target.__name__} is not supported"
    if not isinstance(target, OpOverload):
        return f"call to {getattr(target, '__name__', target)!r} is not an ATen operator"
    if _provided(target, provided):
        return None
    name = _runtime_name(target)
    if name is None:
        return (f"{qualified_name(target)} has no out-variant overload the runtime could call "
                f"(define {target._schema.name}.out, as ExecuTorch's to_executorch needs too)")
    if name not in KERNELS:
        return f"edgetorch's runtime has no kernel for {name}"
    return None


def map_reason(node: torch.fx.Node) -> str | None:
    """``torch.map`` runs as ExecuTorch's emitter writes it: a loop that selects one slice of
    ONE mapped tensor per iteration and copies ONE result into the stacked output."""
    body_attr, mapped, _ = node.args
    if len(mapped) != 1:
        return (f"higher-order operator map_impl maps over {len(mapped)} tensors at once; "
                "ExecuTorch's map loop (and edgetorch's) slices exactly one. Try: map over one "
                "tensor (torch.stack the others into it, or pass them as extra arguments and "
                "index them in the body)")
    body = getattr(node.graph.owning_module, body_attr.target, None)
    outs = body.graph.output_node().args[0] if body is not None else ()
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    if len(outs) != 1:
        return (f"higher-order operator map_impl's body returns {len(outs)} tensors; "
                "ExecuTorch's map loop (and edgetorch's) stacks exactly one. Try: return one "
                "tensor from the mapped function (torch.cat the results and split them after)")
    return None


def verify_runtime_support(ep: ExportedProgram, method: str = "forward",
                           provided: frozenset[str] = frozenset()) -> None:
    """Raise ``UnsupportedOperatorError`` for the first node outside delegates that the
    runtime could not run, else for the first whose dtype its kernel lacks. Operators in
    ``provided`` (the target runtime's own kernels) are not checked."""
    nodes = _nodes(ep)
    problems = [(n, r) for n in nodes if (r := unsupported_reason(n, provided))]
    if not problems:
        skip = {n.target for n in nodes if isinstance(n.target, OpOverload)
                and _provided(n.target, provided)}
        check_kernel_dtypes(nodes, method, skip)
        return
    node, reason = problems[0]
    target = node.target
    op = qualified_name(target) if isinstance(target, OpOverload) else str(target)
    raise UnsupportedOperatorError(
        f"method {method!r}: operator {op} cannot run in the edgetorch runtime: {reason}.\n"
        f"  {describe_node(node)}{_more(problems, node)}\n"
        "  Try: register a kernel with "
        f"@edgetorch.kernels.kernel({_suggest(target)!r}) before to_executorch (then it runs "
        "in edgetorch); or lower that part to a backend with "
        "to_edge_transform_and_lower(..., partitioner=[...]); or rewrite that line with "
        "supported operators. To deploy with your own C++ kernel library linked into "
        "ExecuTorch's runtime, name the operator in ExecutorchBackendConfig("
        f"target_runtime_operators=[{_suggest(target)!r}]) (edgetorch's runtime then refuses "
        "that file at load_method)."
    )


def _nodes(ep: ExportedProgram) -> list[torch.fx.Node]:
    return [n for gm in graph_modules(ep.graph_module) for n in gm.graph.nodes]


def _more(problems: list, first: torch.fx.Node) -> str:
    others = sorted({str(n.target) for n, _ in problems[1:] if n.target != first.target})
    return (f"\n  ({len(problems) - 1} more such node(s): {', '.join(others)})"
            if others else "")


def _suggest(target: object) -> str:
    if isinstance(target, OpOverload):
        name = qualified_name(target)
        return name if name.endswith("out") else name.rsplit(".", 1)[0] + ".out"
    return "namespace::op.out"
