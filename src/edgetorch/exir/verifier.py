"""The Edge verifier: every operator left in a method must be one the runtime can run.

It runs at ``to_edge`` (and after every ``transform``), so an unsupported operator fails on
the developer's machine with the op, the node, the user's source line and what to try --
never later on a device.
"""

from __future__ import annotations

import builtins
import math
import operator

import torch
from torch._ops import HigherOrderOperator, OpOverload
from torch.export import ExportedProgram

from ..errors import UnsupportedOperatorError
from ..kernels import KERNELS
from .dtype_support import check_dtypes
from .ops import describe_node, graph_modules, out_variant, qualified_name

# Python-level ops on symbolic sizes that the emitter turns into executorch_prim calls.
# Python's symbolic-int operations in a graph -> the ``executorch_prim::<name>.Scalar``
# operator the emitter calls for each (ExecuTorch's table).
SYM_OP_NAMES = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul",
    operator.floordiv: "floordiv", operator.truediv: "truediv", operator.mod: "mod",
    operator.neg: "neg", operator.eq: "eq", operator.gt: "gt", operator.lt: "lt",
    operator.ge: "ge", operator.le: "le", torch.sym_float: "sym_float", torch.sym_int: "sym_int",
    builtins.round: "round", math.ceil: "ceil", math.trunc: "trunc", torch.sym_max: "sym_max",
    torch.sym_min: "sym_min", torch.sym_not: "sym_not", torch.sym_ite: "sym_ite",
}
SYM_OPS = set(SYM_OP_NAMES)
_ALLOWED_CALLS = {operator.getitem}
_AUTO_FUNCTIONALIZED = ("auto_functionalized", "auto_functionalized_v2")


def _unwrapped(node: torch.fx.Node) -> torch.fx.Node:
    """A stand-in node calling the op that an ``auto_functionalized`` node wraps."""
    graph = torch.fx.Graph()
    return graph.call_function(node.args[0], (), {})


def _runtime_name(op: OpOverload) -> str | None:
    """The operator string the runtime must have for ``op``, or None when there is none."""
    if op in (torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
              torch.ops.aten._local_scalar_dense.default):
        return qualified_name(op)
    out = out_variant(op)
    return qualified_name(out) if out is not None else None


def unsupported_reason(node: torch.fx.Node, extra_ok: set[object] = frozenset()) -> str | None:
    """Why ``node`` cannot run in the runtime, or None if it can."""
    if node.op != "call_function":
        return None
    target = node.target
    if target in _ALLOWED_CALLS or target in SYM_OPS or target in extra_ok:
        return None
    if isinstance(target, HigherOrderOperator):
        if target is torch.ops.higher_order.cond:
            return None
        if target is torch.ops.higher_order.map_impl:
            return map_reason(node)
        if target.__name__ == "executorch_call_delegate":
            return None
        if target.__name__ in _AUTO_FUNCTIONALIZED:  # a mutating custom op, made in place
            return unsupported_reason(_unwrapped(node), extra_ok)  # again by to_executorch
        return f"higher-order operator {target.__name__} is not supported"
    if not isinstance(target, OpOverload):
        return f"call to {getattr(target, '__name__', target)!r} is not an ATen operator"
    name = _runtime_name(target)
    if name is None:
        return f"{qualified_name(target)} has no out-variant overload the runtime could call"
    if name not in KERNELS:
        return f"the runtime has no kernel for {name}"
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


def verify_edge_program(ep: ExportedProgram, method: str = "forward",
                        extra_ok: set[object] = frozenset()) -> None:
    """Raise ``UnsupportedOperatorError`` for the first node the runtime could not run."""
    problems = []
    nodes = [n for gm in graph_modules(ep.graph_module) for n in gm.graph.nodes]
    for node in nodes:
        reason = unsupported_reason(node, extra_ok)
        if reason is not None:
            problems.append((node, reason))
    if not problems:
        check_dtypes(nodes, method, extra_ok)  # and each operator's dtype has a kernel
        return
    node, reason = problems[0]
    target = node.target
    op = qualified_name(target) if isinstance(target, OpOverload) else str(target)
    others = sorted({str(n.target) for n, _ in problems[1:] if n.target != target})
    more = f"\n  ({len(problems) - 1} more unsupported node(s): {', '.join(others)})" if others else ""
    raise UnsupportedOperatorError(
        f"method {method!r}: operator {op} cannot run in the edgetorch runtime: {reason}.\n"
        f"  {describe_node(node)}{more}\n"
        "  Try: rewrite that line with supported operators; or lower it to a backend with "
        "to_edge_transform_and_lower(..., partitioner=[...]); or register a kernel with "
        f"@edgetorch.kernels.kernel({_suggest(target)!r}); or pass "
        "EdgeCompileConfig(_check_ir_validity=False) to export anyway (the runtime will then "
        "refuse the program at load_method)."
    )


def _suggest(target: object) -> str:
    if isinstance(target, OpOverload):
        name = qualified_name(target)
        return name if name.endswith("out") else name.rsplit(".", 1)[0] + ".out"
    return "namespace::op.out"
