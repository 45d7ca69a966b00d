"""The machinery of the table-driven kernel tests: records, input generators, the runner.

A record (:class:`Op`) names an operator string, a torch reference, and a case generator
``(rng, dtype) -> [args...]``. The dtypes a record is run with come from the kernel library's
own declaration (``edgetorch.kernels.support.SUPPORT``), so the table tests exactly what the
exporter promises. ``dtype`` is the dtype of the operator's *key* argument (see
``DtypeSupport.arg``); other tensors in a case pick their own dtypes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import torch

from edgetorch.kernels import get_kernel
from edgetorch.kernels.support import SUPPORT
from edgetorch.schema.scalar_type import from_numpy_dtype, to_numpy_dtype

A = torch.ops.aten
F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, B = np.dtype(np.uint8), np.dtype(np.bool_)
ALL_DTYPES = (F32, F64, F16, BF16, I8, I16, I32, I64, U8, B)
FLOATS = (F32, F64, F16, BF16)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)  # kernels only: no .pte dtype

TORCH_OF = {F32: torch.float32, F64: torch.float64, F16: torch.float16, BF16: torch.bfloat16,
            I8: torch.int8, I16: torch.int16, I32: torch.int32, I64: torch.int64,
            U8: torch.uint8, B: torch.bool, C64: torch.complex64, C128: torch.complex128}
NUMPY_OF = {t: n for n, t in TORCH_OF.items()}

# Per-dtype tolerance (abs and rel). Half and bfloat16 results are torch's float32 result
# rounded once; ours too, but the float32 values may differ in the last bits, which can move
# the rounding by one step: 2 ulp of the format (2^-10 for half, 2^-7 for bfloat16).
TOLERANCE = {F64: 1e-10, F16: 2e-3, BF16: 1.6e-2}


def isfloat(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt == BF16


def isint(dt) -> bool:
    return np.dtype(dt).kind in "iu"


# ---- records ---------------------------------------------------------------------------


@dataclass
class Case:
    """Arguments (without outs) plus, optionally, the dtype of the outs (default: torch's)."""

    args: list
    out_dtype: Any = None


@dataclass
class Op:
    name: str
    ref: Callable  # torch reference on torch-converted arguments
    cases: Callable  # (rng, dtype) -> list of argument lists / Case
    tol: float = 1e-5  # float32 abs and rel tolerance; see TOLERANCE for the others
    kind: str = "tensor"  # "tensor" | "list_out" | "scalar" | "view" | "random" | "inplace"
    tols: dict = field(default_factory=dict)  # per-dtype overrides of TOLERANCE
    extra_cases: list = field(default_factory=list)  # run with the first dtype only
    check: Callable | None = None  # kind="random": check(args, outs) instead of torch
    other_dtypes: tuple = ()  # also run, outside the documented matrix (complex)
    # dtypes whose torch reference runs in float32 (then rounds once), where torch's CPU
    # kernel computes natively in that low precision and so is less exact than the kernel
    upcast: tuple = ()
    dtype_ref: bool = False  # ref takes dtype= (the case's out dtype): creation ops

    @property
    def dtypes(self) -> tuple[np.dtype, ...]:
        support = SUPPORT.get(self.name)
        if support is None:
            return (F32,)
        have = [np.dtype(to_numpy_dtype(st)) for st in support.dtypes]
        return tuple(d for d in ALL_DTYPES if d in have) + tuple(self.other_dtypes)

    def tolerance(self, dt) -> float:
        dt = np.dtype(dt)
        if dt in self.tols:
            return self.tols[dt]
        if dt == F32:
            return self.tol
        return max(TOLERANCE.get(dt, 0.0), self.tol if dt != F64 and self.tol > 1e-5 else 0.0)


OPS: list[Op] = []


def op(name, ref, cases, tol=1e-5, kind="tensor", **extra) -> Op:
    rec = Op(name, ref, cases, tol, kind, **extra)
    OPS.append(rec)
    return rec


def F(overload: str) -> Callable:
    """The functional torch op (``"add.Tensor"``), called with the out variant's arguments."""
    name, ov = overload.split(".")
    fn = getattr(getattr(A, name), ov)
    schema = fn._schema.arguments

    def call(*args):
        pos, kw = [], {}
        for a, v in zip(schema, args):
            if "ScalarType" in str(a.type) and isinstance(v, int):
                v = TORCH_OF[np.dtype(to_numpy_dtype(v))]
            if a.kwarg_only:
                kw[a.name] = v
            else:
                pos.append(v)
        return fn(*pos, **kw)

    return call


def st(dt) -> int:
    """The ScalarType value of a NumPy dtype (for ``ScalarType? dtype`` arguments)."""
    return int(from_numpy_dtype(np.dtype(dt)))


# ---- inputs ----------------------------------------------------------------------------


def arr(rng, shape, dt, lo=None, hi=None):
    dt = np.dtype(dt)
    if dt == B:
        return np.asarray(rng.random(shape) < 0.5)
    if isint(dt):
        lo = (0 if dt.kind == "u" else -5) if lo is None else max(int(lo), 0 if dt.kind == "u" else -128)
        hi = 6 if hi is None else int(hi)
        return np.asarray(rng.integers(lo, max(hi, lo + 1), size=shape)).astype(dt)
    if dt.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if lo is not None:
        return np.asarray(rng.uniform(lo, hi, size=shape)).astype(dt)
    return np.asarray(rng.standard_normal(shape)).astype(dt)


def nonzero(rng, shape, dt):
    x = arr(rng, shape, dt, 1, 5)
    if np.dtype(dt) == B:
        return np.ones(shape, B)
    if np.dtype(dt).kind == "u":
        return x
    sign = np.where(rng.random(shape) < 0.5, -1, 1)
    return np.asarray((x.astype(np.float64) * sign).astype(dt))


UNARY_SHAPES = [(), (0,), (7,), (3, 4), (2, 3, 4)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((), (3,)), ((2, 1, 4), (3, 1)),
                 ((0, 3), (3,)), ((), ())]


def unary(lo=None, hi=None, variants=((),), shapes=UNARY_SHAPES):
    def gen(rng, dt):
        return [[arr(rng, s, dt, lo, hi), *v] for s in shapes for v in variants]

    return gen


def binary(lo=None, hi=None, rhs=None, variants=((),), mixed=(), mixed_with=F32):
    """Tensor-tensor cases; ``rhs(rng, shape, dt)`` makes the right operand; ``mixed`` adds
    cases with operand dtype pairs (type promotion), generated along with ``mixed_with``."""

    def make_rhs(rng, s, dt):
        return rhs(rng, s, dt) if rhs else arr(rng, s, dt, lo, hi)

    def gen(rng, dt):
        cases = [[arr(rng, a, dt, lo, hi), make_rhs(rng, b, dt), *v]
                 for a, b in BINARY_SHAPES for v in variants]
        if dt == mixed_with:
            for da, db, sa, sb in mixed:
                cases += [[arr(rng, sa, da, lo, hi), make_rhs(rng, sb, db), *v] for v in variants]
        return cases

    return gen


def tensor_scalar(scalars, lo=None, hi=None, variants=((),), shapes=((), (0,), (3, 4), (2, 3, 4))):
    """Tensor-scalar cases; ``scalars(dt)`` lists the scalars to try with a tensor of ``dt``."""

    def gen(rng, dt):
        return [[arr(rng, s, dt, lo, hi), sc, *v] for s in shapes for sc in scalars(dt)
                for v in variants]

    return gen


def num_scalars(dt):
    """A same-kind scalar, and a float one (promotes integer tensors to float32)."""
    if np.dtype(dt) == B:
        return [True, 2]
    if isint(dt):
        return [3, -2, 2.5]
    return [1.5, -2, True]


MIXED = ((I32, F32, (3, 4), (3, 4)), (I64, F32, (3,), ()), (F16, F64, (2, 3), ()),
         (B, I32, (3,), (3,)), (I8, I64, (4,), (4,)), (F32, I64, (), (2, 2)),
         (BF16, F16, (3,), (3,)), (U8, I8, (4,), (4,)), (BF16, I32, (2, 2), ()))


def cases_of(*arg_lists):
    """Fixed cases (arrays built lazily from the rng and dtype)."""

    def build(a, rng, dt):
        if callable(a):
            return a(rng, dt)
        if isinstance(a, list):
            return [build(x, rng, dt) for x in a]
        return a

    def gen(rng, dt):
        return [build(args, rng, dt) for args in arg_lists]

    return gen


def T(shape, lo=None, hi=None, dtype=None):
    return lambda rng, dt: arr(rng, shape, dtype or dt, lo, hi)


def idx(values, dtype=I64):
    return lambda rng, dt: np.asarray(values, dtype=dtype)


def const(value):
    return lambda rng, dt: np.asarray(value, dtype=dt)


# ---- torch conversion ------------------------------------------------------------------


def to_torch(v):
    if isinstance(v, np.ndarray):
        if v.dtype == BF16:
            return torch.from_numpy(np.array(v.view(np.int16), copy=True)).view(torch.bfloat16)
        return torch.from_numpy(np.array(v, copy=True))
    if isinstance(v, list):
        return [to_torch(x) for x in v]
    return v


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


# ---- the runner ------------------------------------------------------------------------


def compare(got: np.ndarray, want: np.ndarray, tol: float, ctx: str) -> None:
    if got.dtype.kind == "c":
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=ctx)
    elif isfloat(got.dtype):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True, err_msg=ctx)
    elif tol >= 1:  # integers allowed to be off by one (documented per record)
        np.testing.assert_allclose(got.astype(np.int64), want.astype(np.int64), rtol=0,
                                   atol=tol, err_msg=ctx)
    else:
        np.testing.assert_array_equal(got, want, err_msg=ctx)


def garbage(shape, dt) -> np.ndarray:
    """A fresh output filled with junk, so a kernel that forgets to write shows up."""
    dt = np.dtype(dt)
    fill = 7 if isint(dt) else (True if dt == B else np.nan)  # complex: nan too
    return np.full(shape, fill, dt)


def as_list(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def describe(args) -> str:
    def d(a):
        if isinstance(a, np.ndarray):
            return f"<{a.dtype}{list(a.shape)}>"
        if isinstance(a, list):
            return "[" + ", ".join(d(x) for x in a) + "]"
        return repr(a)

    return "(" + ", ".join(d(a) for a in args) + ")"


def _upcast(v, low):
    if isinstance(v, torch.Tensor) and v.dtype == low:
        return v.float()
    if isinstance(v, list):
        return [_upcast(x, low) for x in v]
    return v


def torch_expected(rec: Op, case: Case, dt=None) -> list[torch.Tensor]:
    args = to_torch(case.args)
    low = TORCH_OF[np.dtype(dt)] if dt is not None and np.dtype(dt) in rec.upcast else None
    if low is not None:
        args = [_upcast(a, low) for a in args]
    kwargs = {"dtype": TORCH_OF[np.dtype(case.out_dtype)]} if rec.dtype_ref else {}
    expected = [t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
                for t in as_list(rec.ref(*args, **kwargs))]
    if low is not None:
        expected = [t.to(low) if t.dtype == torch.float32 else t for t in expected]
    if case.out_dtype is not None:
        expected = [t.to(TORCH_OF[np.dtype(case.out_dtype)]) for t in expected]
    return expected


def call_kernel(rec: Op, args: list, outs: list[np.ndarray], ctx: str) -> list:
    entry = get_kernel(rec.name)
    if rec.kind == "list_out":
        got = entry.fn(*args, outs)
    else:
        assert entry.num_args == len(args) + len(outs), f"{ctx}: arity {entry.num_args}"
        got = entry.fn(*args, *outs)
    got = as_list(got)
    assert len(got) == len(outs), f"{ctx}: {len(got)} results for {len(outs)} outputs"
    return got


def run_tensor_case(rec: Op, case: Case, dt) -> None:
    args = case.args
    ctx = f"{rec.name} dtype={np.dtype(dt)} args={describe(args)}"
    snapshot = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expected = torch_expected(rec, case, dt)
    outs = [garbage(tuple(t.shape), NUMPY_OF[t.dtype]) for t in expected]
    got = call_kernel(rec, args, outs, ctx)
    for i, (g, o, e) in enumerate(zip(got, outs, expected)):
        assert isinstance(g, np.ndarray), f"{ctx}: result {i} is {type(g).__name__}"
        assert g.shape == tuple(e.shape), f"{ctx}: result {i} shape {g.shape} != {tuple(e.shape)}"
        assert g.dtype == o.dtype, f"{ctx}: result {i} dtype {g.dtype} != out dtype {o.dtype}"
        if g is not o:  # the runtime copies a returned array into the out slot
            np.copyto(o, g, casting="unsafe")
        tol = rec.tolerance(o.dtype if isfloat(o.dtype) else dt)
        if not isfloat(o.dtype):
            tol = rec.tols.get(np.dtype(o.dtype), 0)
        compare(o, to_numpy(e), tol, f"{ctx} result {i}")
    for a, s in zip(args, snapshot):  # kernels are pure: inputs untouched, bit for bit
        if isinstance(a, np.ndarray):
            assert a.tobytes() == s.tobytes(), f"{ctx}: input was modified"


def run_scalar_case(rec: Op, case: Case, dt) -> None:
    entry = get_kernel(rec.name)
    expected = rec.ref(*to_torch(case.args))
    got = entry.fn(*case.args)
    ctx = f"{rec.name}{describe(case.args)}"
    assert type(got) is type(expected), f"{ctx}: {type(got).__name__} != {type(expected).__name__}"
    assert got == expected, f"{ctx}: {got!r} != {expected!r}"


def run_view_case(rec: Op, case: Case, dt) -> None:
    x, size = case.args
    got = get_kernel(rec.name).fn(x, size)
    expected = rec.ref(*to_torch(case.args))
    assert got.shape == tuple(expected.shape)
    assert got.dtype == x.dtype
    if x.size:
        assert np.shares_memory(got, x), "et_view must not copy"
    compare(got, to_numpy(expected), 0, rec.name)


def run_random_case(rec: Op, case: Case, dt) -> None:
    """Nondeterministic ops: torch gives the shapes and dtypes; ``rec.check`` the values."""
    args = case.args
    ctx = f"{rec.name} dtype={np.dtype(dt)} args={describe(args)}"
    expected = torch_expected(rec, case)
    outs = [garbage(tuple(t.shape), NUMPY_OF[t.dtype]) for t in expected]
    got = call_kernel(rec, args, outs, ctx)
    for i, (g, o) in enumerate(zip(got, outs)):
        assert g.shape == o.shape and g.dtype == o.dtype, f"{ctx}: result {i} {g.dtype}{g.shape}"
        if g is not o:
            np.copyto(o, g, casting="unsafe")
    rec.check(args, outs)


def run_inplace_case(rec: Op, case: Case, dt) -> None:
    """In-place ops (``copy_``, ``index_put_``): the kernel writes into ``self`` and returns
    it (or, for ``et_copy_index``, a view of it)."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    ctx = f"{rec.name} dtype={np.dtype(dt)} args={describe(args)}"
    expected = to_numpy(rec.ref(*to_torch(case.args)))
    got = get_kernel(rec.name).fn(*args)
    assert isinstance(got, np.ndarray) and np.shares_memory(got, args[0]) or got.size == 0, \
        f"{ctx}: the result is not (a view of) self"
    assert got.shape == expected.shape and got.dtype == expected.dtype, ctx
    compare(got, expected, rec.tolerance(dt), ctx)


RUNNERS = {"tensor": run_tensor_case, "list_out": run_tensor_case, "scalar": run_scalar_case,
           "view": run_view_case, "random": run_random_case, "inplace": run_inplace_case}


def cases_for(rec: Op, dt) -> list[Case]:
    rng = np.random.default_rng(zlib.crc32(f"{rec.name}{np.dtype(dt)}".encode()))
    out = [c if isinstance(c, Case) else Case(list(c)) for c in rec.cases(rng, dt)]
    if dt == rec.dtypes[0]:
        out += [c if isinstance(c, Case) else Case(list(c)) for c in rec.extra_cases]
    return out


def run_record(rec: Op, dt) -> int:
    n = 0
    for case in cases_for(rec, dt):
        RUNNERS[rec.kind](rec, case, dt)
        n += 1
    return n

