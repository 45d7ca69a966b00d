"""Export-time dtype checks: every operator must be used with dtypes it accepts.

Two tables:

1. The Edge dialect's rules (``exir_ops.edge.*._schema``'s ``allowed_types``, from ExecuTorch's
   ``edge.yaml``): the dtype combinations ExecuTorch's own verifier accepts, checked at
   ``to_edge`` (``check_edge_dtypes``), so a program ExecuTorch would refuse there is refused
   here too.
2. The kernel library's own declaration (``edgetorch.kernels.support``, the table the kernel
   tests run against torch), checked at ``to_executorch`` (``check_kernel_dtypes``), so a
   model that would fail on the device because of a dtype fails on the developer's machine.
   Where both refuse a node at ``to_edge``, this one's message is given: its hints are the
   most specific.

Either error names the operator, the argument, the dtype, the node, the user's source line and
what to try.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import torch
from torch._ops import OpOverload

from ..errors import UnsupportedOperatorError
from ..kernels.support import FLOAT, SUPPORT, DtypeSupport
from ..schema.scalar_type import ScalarType
from .dialects.edge._ops import EdgeOpOverload, is_tensor_arg
from .ops import describe_node, out_variant, qualified_name
from .tensor import scalar_type_of


def _runtime_name(op: OpOverload) -> str | None:
    out = op if op == torch.ops.aten.sym_size.int else out_variant(op)
    return qualified_name(out) if out is not None else None


def key_argument(op: OpOverload, support: DtypeSupport) -> str:
    """The argument ``support`` describes: declared, else the first tensor argument."""
    if support.arg:
        return support.arg
    for a in op._schema.arguments:
        if "Tensor" in str(a.type) and not a.is_out:
            return a.name
    return "out"


def _dtype_of(value: object) -> torch.dtype | None:
    if isinstance(value, torch.fx.Node):
        val = value.meta.get("val")
        if isinstance(val, (tuple, list)):
            val = val[0] if val else None
        return val.dtype if isinstance(val, torch.Tensor) else None
    if isinstance(value, (tuple, list)):  # Tensor[] (cat, stack) or Tensor?[] (index)
        for v in value:
            dt = _dtype_of(v)
            if dt is not None:
                return dt
    return None


def argument_dtype(node: torch.fx.Node, arg: str) -> torch.dtype | None:
    """The dtype of argument ``arg`` of ``node`` (``out``: of its first result)."""
    if arg == "out":
        return _dtype_of(node)
    names = [a.name for a in node.target._schema.arguments]
    if arg in node.kwargs:
        return _dtype_of(node.kwargs[arg])
    if arg in names and names.index(arg) < len(node.args):
        return _dtype_of(node.args[names.index(arg)])
    return None


def dtype_problem(node: torch.fx.Node) -> tuple[str, str, ScalarType, DtypeSupport] | None:
    """``(operator, argument, dtype, support)`` when ``node`` uses an unsupported dtype."""
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return None
    name = _runtime_name(node.target)
    support = SUPPORT.get(name) if name else None
    if support is None:  # not a portable kernel (a user's kernel): nothing declared to check
        return None
    arg = key_argument(node.target, support)
    dtype = argument_dtype(node, arg)
    if dtype is None:
        return None
    try:
        st = scalar_type_of(dtype)
    except TypeError:
        return name, arg, dtype, support
    return None if st in support.dtypes else (name, arg, st, support)


_TORCH_NAMES = {
    ScalarType.FLOAT: "float32", ScalarType.DOUBLE: "float64", ScalarType.HALF: "float16",
    ScalarType.BFLOAT16: "bfloat16", ScalarType.CHAR: "int8", ScalarType.SHORT: "int16",
    ScalarType.INT: "int32", ScalarType.LONG: "int64", ScalarType.BYTE: "uint8",
    ScalarType.BOOL: "bool",
}


def dtype_name(st: object) -> str:
    """torch's name for a ScalarType (``int64``, not ``LONG``)."""
    if isinstance(st, ScalarType):
        return _TORCH_NAMES.get(st, st.name.lower())
    return str(st).removeprefix("torch.")


def _names(dtypes: Iterable[ScalarType]) -> str:
    order = list(_TORCH_NAMES)
    ranked = sorted(dtypes, key=lambda st: order.index(st) if st in order else len(order))
    return ", ".join(dtype_name(st) for st in ranked) or "none"


def _hint(st: object, support: DtypeSupport) -> str:
    if isinstance(st, ScalarType) and support.dtypes & FLOAT and st not in FLOAT:
        return "cast that input to a floating dtype first (x.float()), and back after if needed"
    if support.dtypes & {ScalarType.FLOAT}:
        return "compute that op in float32 (x.float(), then .to(dtype) on its result)"
    return f"cast that input to one of: {_names(support.dtypes)}"


def edge_dtypes(node: torch.fx.Node) -> dict[str, torch.dtype | None]:
    """The dtype of each tensor argument and result (``__ret_N``) of an Edge op's node."""
    schema = node.target._schema.schema
    dtypes: dict[str, torch.dtype | None] = {}
    for a in schema.arguments:
        if is_tensor_arg(a) and (dt := argument_dtype(node, a.name)) is not None:
            dtypes[a.name] = dt
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    rets = [r for r in schema.returns if is_tensor_arg(r)]
    if len(rets) == 1 and len(schema.returns) == 1 and str(rets[0].type) == "List[Tensor]":
        vals = [val]
    for i, (ret, v) in enumerate(zip(rets, vals)):
        if (dt := _dtype_of_value(v)) is not None:
            dtypes[ret.name or f"__ret_{i}"] = dt
    return dtypes


def _dtype_of_value(v: object) -> torch.dtype | None:
    if isinstance(v, torch.Tensor):
        return v.dtype
    if isinstance(v, (tuple, list)) and v and isinstance(v[0], torch.Tensor):
        return v[0].dtype
    return None


def edge_dtype_problem(node: torch.fx.Node) -> tuple[str, dict, str] | None:
    """``(operator, dtypes, argument)`` when an Edge op's node breaks ``edge.yaml``'s rules;
    ``argument`` is the first whose dtype no rule allows, else the first whose dtype no rule
    allows together with the others'."""
    if node.op != "call_function" or not isinstance(node.target, EdgeOpOverload):
        return None
    constraint = node.target._schema.dtype_constraint
    dtypes = edge_dtypes(node)
    if constraint.validate(dtypes):
        return None
    bad = next((n for n, dt in dtypes.items() if dt not in constraint.allowed(n)), None)
    if bad is None:
        bad = next(n for n in dtypes if constraint.validate({**dtypes, n: None}))
    return node.target._op.name(), dtypes, bad


def _arg_label(name: str) -> str:
    return f"result {int(name[6:])}" if name.startswith("__ret_") else f"argument {name!r}"


def _raise_edge_problem(node: torch.fx.Node, problem: tuple[str, dict, str],
                        method: str, more: str) -> None:
    op, dtypes, bad = problem
    constraint = node.target._schema.dtype_constraint
    label = {n: "out" if n.startswith("__ret_") else n for n in dtypes}
    given = ", ".join(f"{label[n]}={dtype_name(d)}" for n, d in dtypes.items())
    others = ", ".join(f"{label[n]}={dtype_name(d)}" for n, d in dtypes.items() if n != bad)
    alone = constraint.allowed(bad)
    if dtypes[bad] not in alone:
        allowed = f"it accepts {_dtype_list(alone)}"
    else:
        allowed = f"with {others} it accepts {_dtype_list(constraint.allowed_given(bad, dtypes))}"
    raise UnsupportedOperatorError(
        f"method {method!r}: Edge operator {op} does not accept {dtype_name(dtypes[bad])} for "
        f"its {_arg_label(bad)} ({allowed}; ExecuTorch's Edge dialect rules, see "
        f"exir_ops.edge.{op.replace('::', '.')}._schema.arguments[i].allowed_types).\n"
        f"  dtypes at this node: {given}\n"
        f"  {describe_node(node)}{more}\n"
        "  Try: cast that input to an allowed dtype before this line (x.float(), "
        "x.to(torch.float16)); or lower the op to a backend with to_edge_transform_and_lower("
        "..., partitioner=[...]); or pass EdgeCompileConfig(_check_ir_validity=False) to export "
        "anyway (ExecuTorch's runtime may then refuse the program)."
    )


def _dtype_list(dtypes: Iterable[torch.dtype]) -> str:
    order = list(_TORCH_NAMES.values())
    names = sorted((dtype_name(d) for d in dtypes),
                   key=lambda n: (order.index(n) if n in order else len(order), n))
    return ", ".join(names) or "no dtype"


def check_kernel_dtypes(nodes: Iterable[torch.fx.Node], method: str = "forward",
                        skip: Collection[object] = frozenset()) -> None:
    """Raise ``UnsupportedOperatorError`` for the first node whose dtype its kernel lacks
    (``to_executorch``: the runtime could not run it)."""
    problems = [(n, p) for n in nodes if n.target not in skip and (p := dtype_problem(n))]
    if problems:
        _raise_kernel_problem(problems, method)


def check_edge_dtypes(nodes: Iterable[torch.fx.Node], method: str = "forward",
                      skip: Collection[object] = frozenset()) -> None:
    """Raise ``UnsupportedOperatorError`` for the first node whose dtypes the Edge dialect
    rules forbid (``to_edge``, as ExecuTorch's verifier). Where the kernel lacks that dtype
    too, the kernel's message is raised: its hints are the most specific."""
    edge = [(n, p) for n in nodes if n.target not in skip and (p := edge_dtype_problem(n))]
    if not edge:
        return
    kernel = [(n, p) for n, _ in edge if (p := dtype_problem(n))]
    if kernel:
        _raise_kernel_problem(kernel, method)
    node, problem = edge[0]
    others = sorted({p[0] for _, p in edge[1:]})
    more = f"\n  ({len(edge) - 1} more: {', '.join(others)})" if others else ""
    _raise_edge_problem(node, problem, method, more)


def _raise_kernel_problem(problems: list, method: str) -> None:
    node, (name, arg, st, support) = problems[0]
    dtype = dtype_name(st)
    others = sorted({f"{p[0]} ({dtype_name(p[2])})" for _, p in problems[1:]})
    more = f"\n  ({len(problems) - 1} more: {', '.join(others)})" if others else ""
    raise UnsupportedOperatorError(
        f"method {method!r}: operator {name} has no kernel for {dtype} {arg!r} tensors "
        f"(its kernel supports {_names(support.dtypes)}"
        f"{'; ' + support.note if support.note else ''}).\n"
        f"  {describe_node(node)}{more}\n"
        f"  Try: {_hint(st, support)}; or lower it to a backend that supports {dtype} with "
        "to_edge_transform_and_lower(..., partitioner=[...]); or register your own kernel with "
        f"edgetorch.kernels.register({name!r}, fn, override=True). docs/operators.md lists "
        "every operator's dtypes."
    )
