"""``executorch_prim``: the runtime's operators on symbolic sizes, as backend ops (ExecuTorch's
``exir.passes.executorch_prim_ops_registry``).

A graph with dynamic sizes computes on them with Python's operators (``operator.sub`` of a
``sym_size``); the runtime runs each as ``executorch_prim::<name>.Scalar``. ``SYM_OP_NAMES``
maps every such callable -- Python's, and the backend op standing for it
(``exir_ops.backend.executorch_prim.sub.Scalar``, which ``EdgeToBackendOpsPass`` puts in the
graph) -- to that name; the emitter and the verifiers read it."""

from __future__ import annotations

import builtins
import math
import operator

import torch
from torch.library import Library

from ..dialects._ops import bind_pattern_to_op
from ..dialects._ops import ops as exir_ops

# Python's callable -> (name, schema after the name, what it computes)
_BINARY = "(Scalar a, Scalar b) -> Scalar"
_COMPARE = "(Scalar a, Scalar b) -> bool"
_UNARY = "(Scalar a) -> Scalar"
_PYTHON_SYM_OPS = {
    operator.add: ("add", _BINARY, lambda a, b: a + b),
    operator.sub: ("sub", _BINARY, lambda a, b: a - b),
    operator.mul: ("mul", _BINARY, lambda a, b: a * b),
    operator.floordiv: ("floordiv", _BINARY, lambda a, b: a // b),
    operator.truediv: ("truediv", _BINARY, lambda a, b: a / b),
    operator.mod: ("mod", "(SymInt a, SymInt b) -> SymInt", lambda a, b: int(a) % int(b)),
    operator.neg: ("neg", _UNARY, lambda a: -a),
    operator.eq: ("eq", _COMPARE, lambda a, b: a == b),
    operator.gt: ("gt", _COMPARE, lambda a, b: a > b),
    operator.lt: ("lt", _COMPARE, lambda a, b: a < b),
    operator.ge: ("ge", _COMPARE, lambda a, b: a >= b),
    operator.le: ("le", _COMPARE, lambda a, b: a <= b),
    torch.sym_float: ("sym_float", _UNARY, float),
    torch.sym_int: ("sym_int", _UNARY, int),
    builtins.round: ("round", _UNARY, round),
    math.ceil: ("ceil", _UNARY, math.ceil),
    math.trunc: ("trunc", _UNARY, math.trunc),
    torch.sym_max: ("sym_max", _BINARY, max),
    torch.sym_min: ("sym_min", _BINARY, min),
    torch.sym_not: ("sym_not", "(Scalar a) -> bool", lambda a: not a),
    torch.sym_ite: ("sym_ite", "(Scalar b, Scalar t, Scalar f) -> Scalar",
                    lambda b, t, f: t if b else f),
}


def _define_backend_ops() -> dict[object, object]:
    """Define the ``executorch_prim`` library once per process; Python's callable -> its
    backend op."""
    if not hasattr(torch.ops.executorch_prim, "sub"):
        lib = Library("executorch_prim", "DEF")
        _LIBS.append(lib)
        for name, schema, fn in _PYTHON_SYM_OPS.values():
            bind_pattern_to_op(lib, f"{name}.Scalar{schema}")(fn)
    return {py: getattr(exir_ops.backend.executorch_prim, name).Scalar
            for py, (name, _, _) in _PYTHON_SYM_OPS.items()}


_LIBS: list[Library] = []
#: Python's symbolic-size callable -> ``exir_ops.backend.executorch_prim.<name>.Scalar``
PYTHON_TO_BACKEND_SYM_OPS = _define_backend_ops()
#: every callable the runtime runs as ``executorch_prim::<name>.Scalar`` -> ``<name>``
SYM_OP_NAMES: dict[object, str] = {py: name for py, (name, _, _) in _PYTHON_SYM_OPS.items()}
SYM_OP_NAMES.update({op: SYM_OP_NAMES[py] for py, op in PYTHON_TO_BACKEND_SYM_OPS.items()})
SYM_OPS = frozenset(SYM_OP_NAMES)
# the ATen operators on sizes that stay ATen in Edge graphs (ExecuTorch's _EXECUTORCH_SYM_OPS)
ATEN_SYM_OPS = frozenset({
    torch.ops.aten.sym_stride.int, torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.sym_constrain_range_for_size.default, torch.ops.aten.sym_constrain_range.default,
})


def is_sym_op(target: object) -> bool:
    """Whether ``target`` computes on symbolic sizes (Python's, backend or ATen form)."""
    try:
        return target in SYM_OPS or target in ATEN_SYM_OPS
    except TypeError:  # an unhashable target
        return False
