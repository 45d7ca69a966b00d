"""Every portable kernel against PyTorch, table-driven (in the style of JAX's lax_test).

One record per operator string: a torch reference, an argument generator (several shapes,
including a 0-d and an empty tensor where torch allows them), the dtypes to try and the
tolerance. Each case calls the kernel *through the registry* with pre-allocated outputs of
torch's result shape and dtype, emulates the runtime's copy of a returned array into ``out``,
and compares with torch.
"""

from __future__ import annotations

import math
import operator
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from edgetorch.kernels import get_kernel, operator_names  # noqa: E402
from edgetorch.schema.scalar_type import ScalarType  # noqa: E402

pytestmark = pytest.mark.torch

A = torch.ops.aten
F32, F64, F16 = np.float32, np.float64, np.float16
I8, I32, I64, U8, B = np.int8, np.int32, np.int64, np.uint8, np.bool_
FLOATS = (F32, F64)
TORCH_DTYPE = {
    ScalarType.BYTE: torch.uint8, ScalarType.CHAR: torch.int8, ScalarType.SHORT: torch.int16,
    ScalarType.INT: torch.int32, ScalarType.LONG: torch.int64, ScalarType.HALF: torch.float16,
    ScalarType.FLOAT: torch.float32, ScalarType.DOUBLE: torch.float64, ScalarType.BOOL: torch.bool,
}


def np_dtype(t: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=t).numpy().dtype


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
    dtypes: tuple = (F32,)
    tol: float = 1e-5  # float32 abs and rel tolerance; float64 uses 1e-10, float16 2e-3
    kind: str = "tensor"  # "tensor" | "list_out" | "scalar" | "view"
    note: str = ""
    extra: dict = field(default_factory=dict)


def F(overload: str) -> Callable:
    """The functional torch op (``"add.Tensor"``), called with the out variant's arguments."""
    name, ov = overload.split(".")
    op = getattr(getattr(A, name), ov)
    schema = op._schema.arguments

    def call(*args):
        pos, kw = [], {}
        for a, v in zip(schema, args):
            if "ScalarType" in str(a.type) and isinstance(v, int):
                v = TORCH_DTYPE[ScalarType(v)]
            if a.kwarg_only:
                kw[a.name] = v
            else:
                pos.append(v)
        return op(*pos, **kw)

    return call


def arr(rng, shape, dt, lo=None, hi=None):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind in "iu":
        lo = (0 if dt.kind == "u" else -5) if lo is None else int(lo)
        hi = 6 if hi is None else int(hi)
        return np.asarray(rng.integers(lo, hi, size=shape)).astype(dt)
    if lo is not None:
        return np.asarray(rng.uniform(lo, hi, size=shape)).astype(dt)
    return np.asarray(rng.standard_normal(shape)).astype(dt)


def nonzero(rng, shape, dt):
    x = arr(rng, shape, dt, 1, 5)
    if np.dtype(dt).kind == "f":
        return np.asarray(x * np.where(rng.random(shape) < 0.5, -1, 1).astype(dt))
    return np.asarray(np.where(rng.random(shape) < 0.5, -x, x).astype(dt))


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
    if np.dtype(dt) == np.bool_:
        return [True, 2]
    if np.dtype(dt).kind in "iu":
        return [3, -2, 2.5]
    return [1.5, -2, True]


MIXED = ((I32, F32, (3, 4), (3, 4)), (I64, F32, (3,), ()), (F16, F64, (2, 3), ()),
         (B, I32, (3,), (3,)), (I8, I64, (4,), (4,)), (F32, I64, (), (2, 2)))


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


# ---- the table -------------------------------------------------------------------------

OPS: list[Op] = []


def op(name, ref, cases, dtypes=(F32,), tol=1e-5, kind="tensor", **extra):
    OPS.append(Op(name, ref, cases, tuple(dtypes), tol, kind, extra=extra))


# unary float ops: (name, functional, low, high)
for _n, _lo, _hi in [
    ("exp", None, None), ("expm1", None, None), ("log", 0.1, 5), ("log1p", -0.9, 5),
    ("log2", 0.1, 5), ("log10", 0.1, 5), ("sqrt", 0, 5), ("rsqrt", 0.1, 5),
    ("reciprocal", 0.5, 3), ("sigmoid", -8, 8), ("tanh", None, None), ("erf", -4, 4),
    ("sin", None, None), ("cos", None, None), ("tan", -1.2, 1.2), ("asin", -0.99, 0.99),
    ("acos", -0.99, 0.99), ("atan", None, None), ("sinh", None, None), ("cosh", None, None),
    ("asinh", None, None), ("acosh", 1.01, 5), ("atanh", -0.99, 0.99),
]:
    # integer inputs are promoted to float32 (positive ints where the domain needs it)
    _int_lo = 1 if _lo is not None and _lo >= 0 else (0 if _lo is not None else None)
    _gen_f = unary(_lo, _hi)
    _gen_i = unary(_int_lo if _n not in ("asin", "acos", "atanh") else 0,
                   2 if _n in ("asin", "acos", "atanh", "reciprocal") else None)

    def _gen(rng, dt, _gf=_gen_f, _gi=_gen_i):
        return _gi(rng, dt) if np.dtype(dt).kind in "iub" else _gf(rng, dt)

    op(f"aten::{_n}.out", F(f"{_n}.default"), _gen, (F32, F64, I32) +
       ((F16,) if _n in ("exp", "sigmoid", "tanh") else ()))

op("aten::abs.out", F("abs.default"), unary(), (F32, F64, I32, I64, F16))
op("aten::neg.out", F("neg.default"), unary(), (F32, I32, I64))
op("aten::sign.out", F("sign.default"),
   lambda rng, dt: unary()(rng, dt) + ([[np.array([np.nan, -0.0, 0.0, 2.0], dt)]]
                                       if np.dtype(dt).kind == "f" else []), (F32, I32, B))
_HALVES = [[np.array([0.5, 1.5, 2.5, -0.5, -2.5, -1.2, 3.7], F32)]]
for _n in ("floor", "ceil", "round", "trunc"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       lambda rng, dt: [[np.asarray(a * 3) if a.dtype.kind == "f" else a]
                        for (a,) in unary()(rng, dt)]
       + (_HALVES if dt == F32 else []), (F32, F64, I32))
op("aten::bitwise_not.out", F("bitwise_not.default"), unary(), (I32, U8, B))
op("aten::logical_not.out", F("logical_not.default"), unary(), (F32, I32, B))


def _with_nonfinite(rng, dt):
    base = unary()(rng, dt)
    if np.dtype(dt).kind == "f":
        base.append([np.array([np.nan, np.inf, -np.inf, 1.0], dt)])
    return base


op("aten::isnan.out", F("isnan.default"), _with_nonfinite, (F32, I32))
op("aten::isinf.out", F("isinf.default"), _with_nonfinite, (F32, I32))

# activations
op("aten::relu.out", F("relu.default"), unary(), (F32, F64, I32, F16))
op("aten::hardtanh.out", F("hardtanh.default"), unary(-4, 8, variants=[(-1.0, 1.0), (0.0, 6.0)]),
   (F32, F64))
op("aten::gelu.out", F("gelu.default"), unary(-6, 6, variants=[("none",), ("tanh",)]),
   (F32, F64))
op("aten::silu.out", F("silu.default"), unary(-8, 8), FLOATS)
op("aten::hardswish.out", F("hardswish.default"), unary(-5, 5), FLOATS)
op("aten::hardsigmoid.out", F("hardsigmoid.default"), unary(-5, 5), FLOATS)
op("aten::leaky_relu.out", F("leaky_relu.default"), unary(variants=[(0.01,), (0.2,)]), FLOATS)
op("aten::elu.out", F("elu.default"), unary(variants=[(1.0, 1.0, 1.0), (0.5, 2.0, 1.5)]),
   FLOATS)
op("aten::logit.out", F("logit.default"), unary(0.01, 0.99, variants=[(None,), (0.05,)]),
   FLOATS)
op("aten::glu.out", F("glu.default"),
   cases_of([T((4, 6)), -1], [T((4, 6)), 0], [T((2, 0, 4)), 2], [T((2, 3, 2)), 2]), FLOATS)

# binary arithmetic
op("aten::add.out", F("add.Tensor"), binary(variants=[(1,), (2,)], mixed=MIXED),
   (F32, F64, I32, I64, F16))
op("aten::sub.out", F("sub.Tensor"), binary(variants=[(1,), (3,)], mixed=MIXED[:3]),
   (F32, F64, I32, I64))
op("aten::mul.out", F("mul.Tensor"), binary(mixed=MIXED), (F32, F64, I32, B, F16))
op("aten::div.out", F("div.Tensor"), binary(rhs=nonzero, mixed=MIXED[:3]), (F32, F64, I32))
op("aten::div.out_mode", F("div.Tensor_mode"),
   binary(rhs=nonzero, variants=[(None,), ("trunc",), ("floor",)], mixed=MIXED[:3]),
   (F32, F64, I32, I64))
op("aten::floor_divide.out", F("floor_divide.default"), binary(rhs=nonzero), (F32, I32, I64))
op("aten::remainder.Tensor_out", F("remainder.Tensor"), binary(rhs=nonzero), (F32, I32, I64))
op("aten::fmod.Tensor_out", F("fmod.Tensor"), binary(rhs=nonzero), (F32, I32, I64))
op("aten::pow.Tensor_Tensor_out", F("pow.Tensor_Tensor"),
   lambda rng, dt: binary(0.5, 3)(rng, dt) + (
       [[np.array([2, -3, 1, -1, 0, 5, -1], dt), np.array([-1, -2, -3, -3, 2, 0, -2], dt)]]
       if np.dtype(dt).kind == "i" else []), (F32, F64, I32, I64))
op("aten::minimum.out", F("minimum.default"),
   lambda rng, dt: binary(mixed=MIXED[:3])(rng, dt) + (
       [[np.array([np.nan, 1.0], dt), np.array([0.0, np.nan], dt)]] if dt == F32 else []),
   (F32, I32, B))
op("aten::maximum.out", F("maximum.default"), binary(), (F32, I32, B))
op("aten::atan2.out", F("atan2.default"), binary(), FLOATS)
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    op(f"aten::{_n}.Tensor_out", F(f"{_n}.Tensor"), binary(), (I32, U8, B))
    op(f"aten::{_n}.Scalar_out", F(f"{_n}.Scalar"),
       tensor_scalar(lambda dt: [True] if dt == B else [3, 12]), (I32, I64, B))

op("aten::add.Scalar_out", F("add.Scalar"),
   tensor_scalar(num_scalars, variants=[(1,), (2,)]), (F32, I32, I8, F16))
op("aten::sub.Scalar_out", F("sub.Scalar"),
   tensor_scalar(lambda dt: [3, 2.5] if dt != F32 else [1.5, -2], variants=[(1,), (2,)]),
   (F32, I32))
op("aten::rsub.Scalar_out", F("rsub.Scalar"),
   tensor_scalar(lambda dt: [3, 2.5] if dt != F32 else [1.5, -2], variants=[(1,), (2,)]),
   (F32, I32))
op("aten::mul.Scalar_out", F("mul.Scalar"), tensor_scalar(num_scalars), (F32, I32, B, F16))
op("aten::div.Scalar_out", F("div.Scalar"),
   tensor_scalar(lambda dt: [3, -2.5, 0.5]), (F32, I32))
op("aten::div.Scalar_mode_out", F("div.Scalar_mode"),
   tensor_scalar(lambda dt: [3, -2] if np.dtype(dt).kind == "i" else [3, -2.5],
                 variants=[(None,), ("trunc",), ("floor",)]), (F32, I32, I64))
op("aten::remainder.Scalar_out", F("remainder.Scalar"),
   tensor_scalar(lambda dt: [3, -2] if np.dtype(dt).kind == "i" else [1.5, -2.0]), (F32, I32))
op("aten::fmod.Scalar_out", F("fmod.Scalar"),
   tensor_scalar(lambda dt: [3, -2] if np.dtype(dt).kind == "i" else [1.5, -2.0]), (F32, I32))
op("aten::pow.Tensor_Scalar_out", F("pow.Tensor_Scalar"),
   tensor_scalar(lambda dt: [2, 3, 0] if np.dtype(dt).kind == "i" else [2, 0.5, -1, 3.0], 0.5, 3),
   (F32, F64, I32))
op("aten::pow.Scalar_out", F("pow.Scalar"),
   lambda rng, dt: [[s, arr(rng, sh, dt, 0, 3)] for s in (2, 1.5) for sh in ((), (0,), (3, 4))],
   (F32, I32))

# comparisons, logical, where, clamp
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    op(f"aten::{_n}.Tensor_out", F(f"{_n}.Tensor"), binary(-2, 3, mixed=MIXED), (F32, I32, B))
    op(f"aten::{_n}.Scalar_out", F(f"{_n}.Scalar"),
       lambda rng, dt: tensor_scalar(num_scalars, -2, 3)(rng, dt)
       + ([[np.array([44, 1], I8), 300]] if dt == I32 else []), (F32, I32, B))
for _n in ("logical_and", "logical_or", "logical_xor"):
    op(f"aten::{_n}.out", F(f"{_n}.default"), binary(-1, 2, mixed=MIXED[:2]), (F32, I32, B))
op("aten::where.self_out", F("where.self"),
   lambda rng, dt: [[arr(rng, c, B), arr(rng, a, dt), arr(rng, b, dt)]
                    for c, a, b in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()),
                                    ((), (2, 3), (2, 3)), ((0, 2), (2,), (0, 1))]]
   + [[arr(rng, (3,), B), arr(rng, (3,), I32), arr(rng, (3,), F32)]], (F32, I64, B))
op("aten::clamp.out", F("clamp.default"),
   lambda rng, dt: [[arr(rng, s, dt), lo, hi] for s in ((), (0,), (3, 4))
                    for lo, hi in ((-1, 2), (None, 1), (0, None), (2, -1), (-0.5, 0.5))],
   (F32, I32))
op("aten::clamp.Tensor_out", F("clamp.Tensor"),
   lambda rng, dt: [[arr(rng, (3, 4), dt), arr(rng, (4,), dt) - 1, arr(rng, (3, 1), dt) + 1],
                    [arr(rng, (3, 4), dt), None, arr(rng, (), dt)],
                    [arr(rng, (3, 4), dt), arr(rng, (3, 4), dt), None],
                    [arr(rng, (0, 4), dt), arr(rng, (4,), dt), None]], (F32, I32))

# reductions
_RED = [((3, 4, 5), [1], False), ((3, 4, 5), [0, 2], True), ((3, 4, 5), None, False),
        ((3, 4, 5), [], False), ((3, 4, 5), [-1], True), ((), [0], False), ((0, 3), [0], False),
        ((0, 3), [1], True)]
op("aten::sum.IntList_out", F("sum.dim_IntList"),
   lambda rng, dt: [[arr(rng, s, dt), d, k, None] for s, d, k in _RED]
   + [[arr(rng, (3, 4), dt), [1], False, int(ScalarType.DOUBLE)]], (F32, F64, I32, B, F16))
op("aten::mean.out", F("mean.dim"),
   lambda rng, dt: [[arr(rng, s, dt), d, k, None] for s, d, k in _RED]
   + [[arr(rng, (3, 4), dt), [0], True, int(ScalarType.DOUBLE)]], (F32, F64, F16))
op("aten::mean.dtype_out", F("mean.default"),
   cases_of([T((3, 4)), None], [T(()), None], [T((2, 3)), int(ScalarType.DOUBLE)]), FLOATS)
op("aten::prod.int_out", F("prod.dim_int"),
   lambda rng, dt: [[arr(rng, (3, 4), dt, -2, 3), 1, False, None],
                    [arr(rng, (3, 4), dt, -2, 3), -2, True, None],
                    [arr(rng, (), dt), 0, False, None], [arr(rng, (0, 2), dt), 0, False, None]],
   (F32, I32))
op("aten::prod.out", F("prod.default"),
   cases_of([T((3, 4), -2, 3), None], [T(()), None], [T((0,)), None]), (F32, I32))
_MINMAX = [((3, 4, 5), [1], False), ((3, 4, 5), [0, 2], True), ((3, 4, 5), [], False),
           ((), [0], False), ((0, 3), [1], False)]
for _n in ("amax", "amin"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       lambda rng, dt: [[arr(rng, s, dt), d, k] for s, d, k in _MINMAX]
       + ([[np.array([[1.0, np.nan], [2.0, 3.0]], dt), [1], False]] if dt == F32 else []),
       (F32, I32, B))
for _n in ("argmax", "argmin"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       lambda rng, dt: [[arr(rng, (3, 4, 5), dt), d, k]
                        for d, k in ((None, False), (None, True), (1, False), (-1, True))]
       + [[arr(rng, (), dt), 0, False], [arr(rng, (), dt), None, True],
          [arr(rng, (0, 3), dt), 1, False], [np.array([1, 3, 3, 0], dt), 0, False]]
       + ([[np.array([1.0, np.nan, 5.0, np.nan], dt), 0, False]] if dt == F32 else []),
       (F32, I32))
for _n in ("max", "min"):
    op(f"aten::{_n}.dim_{_n}", F(f"{_n}.dim"),
       lambda rng, dt: [[arr(rng, (3, 4), dt), 1, False], [arr(rng, (3, 4, 2), dt), 0, True],
                        [arr(rng, (), dt), 0, False], [arr(rng, (0, 3), dt), 1, True],
                        [np.array([[2, 2, 1]], dt), 1, False]], (F32, I32))
    op(f"aten::{_n}.unary_out", F(f"{_n}.default"),
       cases_of([T((3, 4))], [T(())], [T((2, 3, 4))]), (F32, I32, B))
op("aten::any.out", F("any.dim"),
   lambda rng, dt: [[arr(rng, (3, 4), dt, -1, 2), 1, False], [arr(rng, (3, 4), dt, -1, 2), 0, True],
                    [arr(rng, (), dt), 0, False], [arr(rng, (0, 3), dt), 0, False]], (F32, I32, B, U8))
op("aten::any.dims_out", F("any.dims"),
   lambda rng, dt: [[arr(rng, (3, 4, 2), dt, -1, 2), d, k]
                    for d, k in (([1], False), ([0, 2], True), (None, False), ([], False))]
   + [[arr(rng, (0, 3), dt), [0], False]], (F32, I32, B, U8))
op("aten::any.all_out", F("any.default"),
   cases_of([T((3, 4), -1, 2)], [T(())], [T((0,))]), (F32, I32, B, U8))
_VAR = [((3, 4, 5), [1], None, False), ((3, 4, 5), [0, 2], 0, True), ((3, 4, 5), None, 1, False),
        ((3, 4, 5), [-1], 2, False), ((), None, 0, False), ((4,), [], 1, False)]
op("aten::var.correction_out", F("var.correction"),
   lambda rng, dt: [[arr(rng, s, dt), d, c, k] for s, d, c, k in _VAR], FLOATS)
op("aten::std.correction_out", F("std.correction"),
   lambda rng, dt: [[arr(rng, s, dt), d, c, k] for s, d, c, k in _VAR], FLOATS)
op("aten::var_mean.correction_out", F("var_mean.correction"),
   lambda rng, dt: [[arr(rng, s, dt), d, c, k] for s, d, c, k in _VAR], FLOATS)
op("aten::var.out", F("var.dim"),
   cases_of([T((3, 4, 5)), [1], True, False], [T((3, 4, 5)), [0, 2], False, True],
            [T((3, 4)), None, True, False]), FLOATS)


def _softmax_cases(rng, dt):
    masked = arr(rng, (2, 3, 5), dt)
    masked[..., 3:] = -np.inf  # attention-style masking
    masked[1, 2, :] = -np.inf  # a fully masked row gives nan, as in torch
    return [[arr(rng, (3, 4, 5), dt), -1, False], [arr(rng, (3, 4, 5), dt), 0, False],
            [arr(rng, (), dt), 0, False], [arr(rng, (0, 5), dt), 1, False],
            [arr(rng, (4, 0), dt), 1, False], [masked, -1, False],
            [arr(rng, (2, 3), dt) * 50, 1, False]]


op("aten::_softmax.out", F("_softmax.default"), _softmax_cases, (F32, F64))
op("aten::_log_softmax.out", F("_log_softmax.default"), _softmax_cases, (F32, F64))
op("aten::cumsum.out", F("cumsum.default"),
   lambda rng, dt: [[arr(rng, (3, 4), dt), 1, None], [arr(rng, (3, 4), dt), 0, None],
                    [arr(rng, (), dt), 0, None], [arr(rng, (0, 3), dt), 1, None],
                    [arr(rng, (2, 5), dt), -1, int(ScalarType.DOUBLE)]], (F32, F64, I32, B))
op("aten::topk.values", F("topk.default"),
   cases_of([T((3, 6)), 3, -1, True, True], [T((3, 6)), 2, 0, False, True],
            [T((5,)), 5, 0, True, True], [T((4, 0)), 0, 1, True, True]), (F32, I32))

# linear algebra (BLAS sums in a different order than torch's: 1e-5 still holds at these sizes)
op("aten::mm.out", F("mm.default"),
   cases_of([T((3, 4)), T((4, 5))], [T((0, 4)), T((4, 5))], [T((3, 0)), T((0, 5))],
            [T((1, 7)), T((7, 1))]), (F32, F64, I32, I64))
op("aten::bmm.out", F("bmm.default"),
   cases_of([T((2, 3, 4)), T((2, 4, 5))], [T((0, 3, 4)), T((0, 4, 2))]), (F32, F64, I64))
op("aten::addmm.out", F("addmm.default"),
   lambda rng, dt: [[arr(rng, (5,), dt), arr(rng, (3, 4), dt), arr(rng, (4, 5), dt), 1, 1],
                    [arr(rng, (3, 5), dt), arr(rng, (3, 4), dt), arr(rng, (4, 5), dt), 2, 3],
                    [arr(rng, (1, 5), dt), arr(rng, (3, 0), dt), arr(rng, (0, 5), dt), 1, 1]]
   + ([[np.full((3, 5), np.nan, dt), arr(rng, (3, 4), dt), arr(rng, (4, 5), dt), 0, 0.5]]
      if np.dtype(dt).kind == "f" else []), (F32, F64, I64))
op("aten::linear.out", F("linear.default"),
   cases_of([T((2, 3, 4)), T((5, 4)), T((5,))], [T((3, 4)), T((5, 4)), None],
            [T((4,)), T((5, 4)), T((5,))], [T((0, 4)), T((2, 4)), T((2,))]), FLOATS)


# convolution: (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
def _conv(x, w, b, s, p, d, tr, op_, g):
    return [T(x), T(w), T(b) if b else None, s, p, d, tr, op_, g]


_CONVS = [
    _conv((2, 3, 8, 8), (4, 3, 3, 3), (4,), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    _conv((1, 4, 9, 9), (6, 4, 3, 3), None, [2, 2], [0, 0], [2, 2], False, [0, 0], 1),
    _conv((2, 4, 7, 7), (6, 2, 3, 3), (6,), [2, 1], [1, 2], [1, 1], False, [0, 0], 2),
    _conv((2, 6, 8, 8), (6, 1, 3, 3), (6,), [1, 1], [1, 1], [1, 1], False, [0, 0], 6),
    _conv((1, 3, 7, 6), (6, 1, 3, 3), None, [2, 2], [1, 0], [1, 2], False, [0, 0], 3),
    _conv((2, 3, 10), (5, 3, 3), (5,), [2], [1], [1], False, [0], 1),
    _conv((2, 3, 5, 5), (8, 3, 1, 1), (8,), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    _conv((1, 2, 4, 5, 5), (3, 2, 2, 3, 3), (3,), [1, 2, 1], [0, 1, 1], [1, 1, 1], False,
          [0, 0, 0], 1),
    _conv((0, 3, 5, 5), (4, 3, 3, 3), (4,), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    _conv((2, 4, 5, 5), (4, 3, 3, 3), (3,), [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
    _conv((1, 4, 4, 4), (4, 2, 3, 3), (4,), [2, 2], [0, 1], [2, 1], True, [1, 0], 2),
    _conv((2, 3, 6), (3, 2, 4), None, [3], [1], [1], True, [2], 1),
    _conv((1, 4, 5, 5), (4, 1, 3, 3), (4,), [2, 2], [1, 1], [1, 1], True, [0, 0], 4),
    _conv((1, 2, 3, 3), (2, 3, 2, 2), None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1),
]
op("aten::convolution.out", F("convolution.default"), cases_of(*_CONVS), FLOATS, tol=1e-5)


def _bn_cases(rng, dt):
    out = []
    for shape in ((2, 3, 4, 4), (4, 3), (2, 3, 5), (0, 3, 2, 2)):
        c = shape[1]
        w, b = arr(rng, (c,), dt), arr(rng, (c,), dt)
        rm, rv = arr(rng, (c,), dt), arr(rng, (c,), dt, 0.5, 2)
        out += [[arr(rng, shape, dt), w, b, rm, rv, 0.1, 1e-5],
                [arr(rng, shape, dt), None, None, rm, rv, 0.1, 1e-3]]
    return out


op("aten::_native_batch_norm_legit_no_training.out",
   F("_native_batch_norm_legit_no_training.default"), _bn_cases, FLOATS)
op("aten::_native_batch_norm_legit.out", F("_native_batch_norm_legit.default"),
   lambda rng, dt: [a[:5] + [False] + a[5:] for a in _bn_cases(rng, dt)], FLOATS)
op("aten::_native_batch_norm_legit.no_stats_out", F("_native_batch_norm_legit.no_stats"),
   cases_of([T((2, 3, 4, 4)), T((3,)), T((3,)), True, 0.1, 1e-5],
            [T((4, 3)), None, None, True, 0.1, 1e-5], [T((2, 3, 5)), T((3,)), None, True, 0.1, 1e-3]),
   FLOATS)
op("aten::native_layer_norm.out", F("native_layer_norm.default"),
   cases_of([T((2, 3, 8)), [8], T((8,)), T((8,)), 1e-5],
            [T((2, 3, 8)), [3, 8], T((3, 8)), None, 1e-5], [T((4, 6)), [6], None, None, 1e-3],
            [T((0, 5)), [5], T((5,)), T((5,)), 1e-5], [T((7,)), [7], T((7,)), T((7,)), 1e-5]),
   FLOATS)
op("aten::native_group_norm.out", F("native_group_norm.default"),
   cases_of([T((2, 6, 4, 4)), T((6,)), T((6,)), 2, 6, 16, 3, 1e-5],
            [T((3, 4, 5)), None, None, 3, 4, 5, 2, 1e-5], [T((2, 4)), T((4,)), T((4,)), 2, 4, 1, 4, 1e-5]),
   FLOATS)

_POOL = [((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
         ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], True),
         ((1, 2, 10, 10), [3, 2], [], [1, 0], [1, 1], False),
         ((2, 7, 7), [3, 3], [2, 3], [1, 1], [2, 2], True),
         ((1, 1, 6, 6), [2, 2], [2, 2], [1, 1], [1, 1], True),
         ((0, 2, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False),
         ((1, 3, 5, 5), [5, 5], [1, 1], [2, 2], [1, 1], False)]


def _maxpool_cases(rng, dt):
    cs = [[arr(rng, s, dt, -50, 50), k, st, p, d, c] for s, k, st, p, d, c in _POOL]
    if dt == F32:
        x = arr(rng, (1, 1, 4, 4), dt)
        x[0, 0, 0, 1] = x[0, 0, 0, 0] = np.nan
        x[0, 0, 3, :] = -np.inf
        cs += [[x, [2, 2], [2, 2], [0, 0], [1, 1], False], [x, [2, 2], [1, 1], [1, 1], [1, 1], True]]
    return cs


op("aten::max_pool2d_with_indices.out", F("max_pool2d_with_indices.default"), _maxpool_cases,
   (F32, F64, I64))
op("aten::avg_pool2d.out", F("avg_pool2d.default"),
   lambda rng, dt: [[arr(rng, s, dt), k, st, p, c, cip, dv]
                    for s, k, st, p, _, c in _POOL
                    for cip, dv in ((True, None), (False, None), (True, 5))], (F32, F64, I64))
op("aten::_adaptive_avg_pool2d.out", F("_adaptive_avg_pool2d.default"),
   cases_of([T((2, 3, 8, 8)), [4, 4]], [T((1, 2, 7, 9)), [3, 4]], [T((2, 3, 5, 5)), [1, 1]],
            [T((3, 6, 5)), [4, 2]], [T((1, 2, 3, 3)), [5, 4]], [T((0, 2, 4, 4)), [2, 2]]), FLOATS)
op("aten::upsample_nearest2d.vec_out", F("upsample_nearest2d.vec"),
   cases_of([T((2, 3, 8, 8)), [16, 16], None], [T((1, 2, 4, 6)), [5, 7], None],
            [T((1, 2, 4, 6)), None, [2.0, 3.0]], [T((1, 2, 8, 6)), None, [0.5, 0.5]],
            [T((1, 1, 5, 3)), None, [1.7, 1.3]], [T((1, 2, 6, 6)), [4, 9], None]), (F32, U8))
op("aten::upsample_bilinear2d.vec_out", F("upsample_bilinear2d.vec"),
   lambda rng, dt: [[arr(rng, s, dt), o, ac, sc]
                    for s, o, sc in (((1, 2, 4, 5), [7, 9], None), ((2, 3, 8, 8), None, [2.0, 2.0]),
                                     ((1, 2, 9, 9), [3, 3], None), ((1, 1, 5, 4), None, [1.5, 0.75]),
                                     ((1, 2, 4, 4), [4, 6], None), ((1, 1, 3, 3), [1, 1], None))
                    for ac in (False, True)], FLOATS)
op("aten::constant_pad_nd.out", F("constant_pad_nd.default"),
   cases_of([T((2, 3)), [1, 2], 0], [T((2, 3, 4)), [1, 1, 2, 0], 1.5], [T((3, 5)), [-1, 2], 0],
            [T((3, 5)), [1, -2, -1, 1], 2], [T((0, 2)), [1, 1], 0], [T((4,)), [0, 0], 0]),
   (F32, I32))
for _n, _nd in (("reflection_pad1d", 1), ("reflection_pad2d", 2), ("replication_pad1d", 1),
                ("replication_pad2d", 2)):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       cases_of([T((2, 3, 6)), [2, 1]], [T((3, 5)), [0, 3]]) if _nd == 1 else
       cases_of([T((1, 2, 5, 5)), [1, 2, 2, 0]], [T((2, 4, 3)), [2, 2, 1, 1]]), FLOATS)

# indexing
op("aten::embedding.out", F("embedding.default"),
   cases_of([T((10, 4)), T((3, 5), 0, 10, I64), -1, False, False],
            [T((10, 4)), T((), 0, 10, I64), -1, False, False],
            [T((6, 3)), T((4,), 0, 6, I32), 2, False, False],
            [T((6, 3)), T((0,), 0, 6, I64), -1, False, False]), (F32, I64))
op("aten::index_select.out", F("index_select.default"),
   cases_of([T((4, 5)), 0, idx([3, 0, 0])], [T((4, 5)), 1, idx(2)], [T((4, 5, 2)), -1, idx([1], I32)],
            [T((4, 5)), 0, idx([], I64)], [T(()), 0, idx([0])]), (F32, I32, B))
op("aten::index.Tensor_out", F("index.Tensor"),
   cases_of([T((4, 5, 6)), [idx([3, 0, -1])]], [T((4, 5, 6)), [None, idx([[1, 2], [0, 4]])]],
            [T((4, 5, 6)), [idx([3, 0, 1]), None, idx([5, 0, 2])]],
            [T((4, 5, 6)), [idx([True, False, True, True], B)]],
            [T((4, 5, 6)), [idx([[1], [2]]), idx([0, 1, 4], I32)]],
            [T((4, 5)), [None, idx([], I64)]]), (F32, I64))
op("aten::index_put.out", F("index_put.default"),
   cases_of([T((4, 5)), [idx([3, 0])], T((2, 5)), False],
            [T((4, 5)), [idx([3, 0, 3]), idx([1, 1, 1])], T((3,)), True],
            [T((4, 5)), [None, idx([4, 0])], T((4, 2)), False],
            [T((4, 5)), [idx([True, False, True, False], B)], T(()), False]), (F32, I64))
op("aten::gather.out", F("gather.default"),
   cases_of([T((3, 4)), 1, idx([[0, 3], [1, 1], [2, 0]]), False],
            [T((3, 4)), 0, idx([[2, 0, 1, 1]]), False], [T((3, 4)), -1, idx([[1], [0]]), False],
            [T(()), 0, idx(0), False], [T((3, 4)), 1, idx(np.zeros((3, 0))), False]), (F32, I32))


def _perm_rows(rng, rows, n, k):
    return np.stack([rng.permutation(n)[:k] for _ in range(rows)]).astype(I64)


op("aten::scatter.src_out", F("scatter.src"),
   lambda rng, dt: [[arr(rng, (3, 5), dt), 1, _perm_rows(rng, 3, 5, 2), arr(rng, (3, 4), dt)],
                    [arr(rng, (4, 3), dt), 0, _perm_rows(rng, 3, 4, 4).T.copy()[:2],
                     arr(rng, (2, 3), dt)],
                    [arr(rng, (), dt), 0, np.array(0), arr(rng, (), dt)]], (F32, I32))
op("aten::scatter.value_out", F("scatter.value"),
   lambda rng, dt: [[arr(rng, (3, 5), dt), 1, _perm_rows(rng, 3, 5, 2), 7],
                    [arr(rng, (3, 5), dt), -1, _perm_rows(rng, 2, 5, 3), -1.0 if dt == F32 else 2]],
   (F32, I32))
op("aten::scatter_add.out", F("scatter_add.default"),
   cases_of([T((3, 5)), 1, idx([[0, 0, 4], [1, 1, 1], [2, 3, 2]]), T((3, 4))],
            [T((4, 2)), 0, idx([[0, 1], [0, 1], [3, 3]]), T((3, 2))]), (F32, I64))
op("aten::masked_fill.Scalar_out", F("masked_fill.Scalar"),
   cases_of([T((3, 4)), T((3, 4), dtype=B), 2], [T((3, 4)), T((4,), dtype=B), -1],
            [T(()), T((), dtype=B), 0], [T((0, 4)), T((4,), dtype=B), 1]), (F32, I32))
op("aten::masked_select.out", F("masked_select.default"),
   cases_of([T((3, 4)), T((3, 4), dtype=B)], [T((3, 4)), T((4,), dtype=B)], [T(()), T((), dtype=B)]),
   (F32, I32))
op("aten::nonzero.out", F("nonzero.default"),
   cases_of([T((3, 4), -1, 2)], [T((5,), -1, 2)], [T((0, 3))], [T((2, 2, 3), -1, 2)]), (F32, I32, B))

# shape and copy ops
op("aten::clone.out", F("clone.default"), unary(variants=[(None,)]), (F32, I64, B))
op("aten::alias_copy.out", F("alias_copy.default"), unary(), (F32, I64))
op("aten::detach_copy.out", F("detach_copy.default"), unary(), (F32,))
op("aten::lift_fresh_copy.out", F("lift_fresh_copy.default"), unary(), (F32,))
_CONV_DT = {np.dtype(F32): ScalarType.INT, np.dtype(I32): ScalarType.DOUBLE,
            np.dtype(B): ScalarType.FLOAT, np.dtype(F64): ScalarType.HALF}


def _conversions(extra):
    def gen(rng, dt):
        return [Case([arr(rng, s, dt, -30, 30), *extra], np_dtype(TORCH_DTYPE[_CONV_DT[np.dtype(dt)]]))
                for s in UNARY_SHAPES] + [Case([arr(rng, (3,), dt), *extra], None)]

    return gen


op("aten::_to_copy.out", lambda x, nb, mf: x.clone(), _conversions([False, None]), (F32, F64, I32, B))
op("aten::copy.out", F("copy.default"),
   cases_of([T((3, 4)), T((3, 4), dtype=I32), False], [T((2, 3, 4)), T((4,)), False],
            [T(()), T(()), False], [T((0, 2)), T((2,)), False]), (F32, I64))
op("aten::view_copy.out", F("view_copy.default"),
   cases_of([T((3, 4)), [4, 3]], [T((2, 3, 4)), [-1, 4]], [T(()), [1, 1]], [T((0, 3)), [3, 0]],
            [T((1,)), []]), (F32, B))
op("aten::permute_copy.out", F("permute_copy.default"),
   cases_of([T((2, 3, 4)), [2, 0, 1]], [T((2, 3, 4)), [-1, 1, 0]], [T(()), []], [T((0, 3)), [1, 0]]),
   (F32, I32))
op("aten::expand_copy.out", F("expand_copy.default"),
   cases_of([T((3, 1)), [3, 4], False], [T((3, 1)), [2, -1, 5], False], [T(()), [2, 2], False],
            [T((1, 0)), [3, 0], False]), (F32, B))
op("aten::t_copy.out", F("t_copy.default"), cases_of([T((3, 4))], [T((5,))], [T(())], [T((0, 2))]),
   (F32,))
op("aten::transpose_copy.int_out", F("transpose_copy.int"),
   cases_of([T((2, 3, 4)), 0, 2], [T((2, 3, 4)), -1, 1], [T(()), 0, -1], [T((0, 3)), 0, 1]), (F32,))
op("aten::unsqueeze_copy.out", F("unsqueeze_copy.default"),
   cases_of([T((2, 3)), 0], [T((2, 3)), -1], [T(()), 0], [T((0, 3)), 1]), (F32,))
op("aten::squeeze_copy.dim_out", F("squeeze_copy.dim"),
   cases_of([T((2, 1, 3)), 1], [T((2, 1, 3)), 0], [T(()), 0], [T((1, 0)), -2]), (F32,))
op("aten::squeeze_copy.dims_out", F("squeeze_copy.dims"),
   cases_of([T((1, 2, 1, 3)), [0, 2]], [T((1, 2, 1)), [-1, 1]], [T(()), [0]], [T((1, 0)), []]),
   (F32,))
op("aten::squeeze_copy.out", F("squeeze_copy.default"),
   cases_of([T((1, 2, 1, 3))], [T(())], [T((1, 0, 1))]), (F32,))
op("aten::slice_copy.Tensor_out", F("slice_copy.Tensor"),
   cases_of([T((5, 6)), 1, 1, 4, 1], [T((5, 6)), 0, -3, None, 2], [T((5, 6)), -1, None, -1, 3],
            [T((5, 6)), 0, 4, 2, 1], [T((5, 6)), 1, 2, 2**62, 1], [T((0, 2)), 0, 0, 1, 1]), (F32, I64))
op("aten::select_copy.int_out", F("select_copy.int"),
   cases_of([T((3, 4)), 0, 2], [T((3, 4)), 1, -1], [T((4,)), 0, 1], [T((3, 0)), 0, 1]), (F32,))
op("aten::narrow_copy.out", F("narrow_copy.default"),
   cases_of([T((5, 4)), 0, 1, 3], [T((5, 4)), 1, -2, 2], [T((5, 4)), 0, 5, 0]), (F32,))
op("aten::diagonal_copy.out", F("diagonal_copy.default"),
   cases_of([T((4, 5)), 0, 0, 1], [T((4, 5)), 1, 1, 0], [T((2, 3, 4)), -1, 0, 2], [T((0, 3)), 0, 0, 1]),
   (F32,))
op("aten::cat.out", F("cat.default"),
   cases_of([[T((2, 3)), T((4, 3))], 0], [[T((2, 3)), T((2, 1)), T((2, 0))], -1],
            [[T((2, 3)), T((0,))], 1], [[T((0,)), T((0,))], 0], [[T((2, 3, 4))], 1]), (F32, I64))
OPS[-1].extra["extra_cases"] = [[[np.ones((2, 2), I32), np.ones((1, 2), F32)], 0]]
op("aten::stack.out", F("stack.default"),
   cases_of([[T((2, 3)), T((2, 3))], 0], [[T((2, 3)), T((2, 3)), T((2, 3))], -1],
            [[T(()), T(())], 0], [[T((0, 2))], 1]), (F32, B))
op("aten::split_with_sizes_copy.out", F("split_with_sizes_copy.default"),
   cases_of([T((5, 4)), [2, 3], 0], [T((5, 4)), [1, 0, 3], -1], [T((0, 4)), [0, 0], 0]), (F32,),
   kind="list_out")
op("aten::split_copy.Tensor_out", F("split_copy.Tensor"),
   cases_of([T((5, 4)), 2, 0], [T((5, 4)), 4, 1], [T((5, 4)), 10, 0], [T((0, 4)), 2, 0]), (F32,),
   kind="list_out")
op("aten::unbind_copy.int_out", F("unbind_copy.int"),
   cases_of([T((3, 4)), 0], [T((3, 4)), -1], [T((2, 0)), 0]), (F32,), kind="list_out")
op("aten::flip.out", F("flip.default"),
   cases_of([T((3, 4)), [0]], [T((2, 3, 4)), [0, -1]], [T(()), []], [T((0, 2)), [1]]), (F32, I32))
op("aten::roll.out", F("roll.default"),
   cases_of([T((3, 4)), [1], [0]], [T((3, 4)), [2, -1], [1, 0]], [T((3, 4)), [5], []],
            [T((0, 2)), [1], [1]]), (F32,))
op("aten::repeat.out", F("repeat.default"),
   cases_of([T((2, 3)), [2, 1]], [T((2, 3)), [2, 1, 3]], [T(()), [3]], [T((0, 2)), [2, 2]]), (F32, B))
op("aten::tril.out", F("tril.default"),
   cases_of([T((4, 5)), 0], [T((2, 4, 5)), 1], [T((4, 5)), -2], [T((0, 3)), 0]), (F32, I32))
op("aten::triu.out", F("triu.default"),
   cases_of([T((4, 5)), 0], [T((2, 4, 5)), 1], [T((4, 5)), -2], [T((0, 3)), 0]), (F32, I32))
op("aten::pixel_shuffle.out", F("pixel_shuffle.default"),
   cases_of([T((2, 8, 3, 3)), 2], [T((9, 2, 2)), 3], [T((1, 2, 4, 3, 3)), 2]), (F32,))
op("aten::pixel_unshuffle.out", F("pixel_unshuffle.default"),
   cases_of([T((2, 2, 6, 6)), 2], [T((1, 6, 6)), 3]), (F32,))
op("aten::select_scatter.out", F("select_scatter.default"),
   cases_of([T((3, 4)), T((4,)), 0, 1], [T((3, 4)), T((3,)), 1, -1], [T((2, 3, 4)), T((2, 4)), 1, 0]),
   (F32,))
op("aten::slice_scatter.out", F("slice_scatter.default"),
   cases_of([T((5, 4)), T((2, 4)), 0, 1, 3, 1], [T((5, 4)), T((5, 2)), 1, None, None, 2],
            [T((5, 4)), T((0, 4)), 0, 2, 2, 1], [T((6, 2)), T((2, 2)), 0, -3, None, 2]), (F32,))

# creation
op("aten::full.out", lambda size, v: torch.full(size, v),
   lambda rng, dt: [[[2, 3], 1.5], [[], 2], [[0, 3], True], [[4], -1]]
   + [Case([[2, 3], 1], F32), Case([[2, 2], 2.0], I32), Case([[3], 1], B)], (F32,))
op("aten::full_like.out", lambda x, v, mf: torch.full_like(x, v),
   lambda rng, dt: [[arr(rng, s, dt), 3, None] for s in UNARY_SHAPES], (F32, I32, B))
op("aten::fill.Scalar_out", F("fill.Scalar"),
   lambda rng, dt: [[arr(rng, s, dt), 2] for s in UNARY_SHAPES], (F32, I32))
op("aten::fill.Tensor_out", F("fill.Tensor"),
   lambda rng, dt: [[arr(rng, s, dt), arr(rng, (), dt)] for s in UNARY_SHAPES], (F32, I32))
op("aten::zeros.out", lambda size: torch.zeros(size),
   lambda rng, dt: [[[2, 3]], [[]], [[0, 4]], Case([[3]], I64)], (F32,))
op("aten::ones.out", lambda size: torch.ones(size),
   lambda rng, dt: [[[2, 3]], [[]], [[0, 4]], Case([[3]], I64)], (F32,))
op("aten::empty.out", lambda size, mf: torch.zeros(size),
   lambda rng, dt: [[[2, 3], None], [[0], None], Case([[3], None], I32)], (F32,))
op("aten::scalar_tensor.out", lambda s: torch.scalar_tensor(s),
   lambda rng, dt: [[2.5], [3], Case([3], I64), Case([True], B), Case([1.5], F64)], (F32,))
op("aten::arange.start_out", lambda a, b, c: torch.arange(a, b, c),
   lambda rng, dt: [[0, 5, 1], [2, 11, 3], [5, 0, -2], [0.0, 1.0, 0.1], [-1.5, 2.5, 0.5], [3, 3, 1],
                    Case([0, 5, 1], F32), Case([0.5, 3.0, 0.25], F64)], (F32,))
op("aten::arange.out", lambda a: torch.arange(a),
   lambda rng, dt: [[5], [0], [2.5], Case([4], F32)], (F32,))

# dim order ops (ExecuTorch)
op("dim_order_ops::_to_dim_order_copy.out", lambda x, nb, do: x.clone(),
   _conversions([False, None]), (F32, F64, I32, B))
op("dim_order_ops::_clone_dim_order.out", lambda x, nb, do: x.clone(),
   lambda rng, dt: [[arr(rng, s, dt), False, None] for s in UNARY_SHAPES]
   + [[arr(rng, (2, 3, 4, 5), dt), False, [0, 2, 3, 1]]], (F32, I64))
op("dim_order_ops::_empty_dim_order.out", lambda size, do: torch.zeros(size),
   lambda rng, dt: [[[2, 3], None], [[1, 2, 3, 4], [0, 2, 3, 1]], Case([[0, 2], None], I64)], (F32,))

# prim ops: reference is Python's operator on the same scalars
_PAIRS = [(7, 2), (-7, 2), (7, -2), (7.5, 2), (3, 0.5), (-7.0, 2.0), (2, 7)]
for _n, _f in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
               ("floordiv", operator.floordiv), ("truediv", operator.truediv),
               ("mod", operator.mod), ("eq", operator.eq), ("gt", operator.gt),
               ("lt", operator.lt), ("ge", operator.ge), ("le", operator.le),
               ("sym_max", max), ("sym_min", min)):
    _pairs = _PAIRS if _n not in ("sym_max", "sym_min") else [p for p in _PAIRS
                                                              if isinstance(p[0], int)
                                                              and isinstance(p[1], int)]
    op(f"executorch_prim::{_n}.Scalar", _f, cases_of(*[list(p) for p in _pairs]), kind="scalar")
op("executorch_prim::floordiv.int", lambda a, b: int(a / b),
   cases_of([7, 2], [-7, 2], [7, -2], [6, 3]), kind="scalar")
op("executorch_prim::mod.int", lambda a, b: int(math.fmod(a, b)),
   cases_of([7, 2], [-7, 2], [7, -2], [6, 3]), kind="scalar")
op("executorch_prim::neg.Scalar", operator.neg, cases_of([3], [-2.5], [0]), kind="scalar")
op("executorch_prim::sym_float.Scalar", float, cases_of([3], [2.5], [True]), kind="scalar")
op("executorch_prim::sym_int.Scalar", int, cases_of([3], [2.7], [-2.7], [True]), kind="scalar")
op("executorch_prim::ceil.Scalar", math.ceil, cases_of([2.1], [-2.1], [3.0]), kind="scalar")
op("executorch_prim::round.Scalar", round, cases_of([2.5], [3.5], [-2.5], [2.4]), kind="scalar")
op("executorch_prim::trunc.Scalar", math.trunc, cases_of([2.7], [-2.7]), kind="scalar")
op("executorch_prim::sym_not.Scalar", operator.not_, cases_of([True], [False]), kind="scalar")
op("executorch_prim::sym_ite.Scalar", lambda b, t, f: t if b else f,
   cases_of([True, 1, 2], [False, 1.5, 2.5]), kind="scalar")
op("aten::sym_size.int", lambda t, d: t.shape[d],
   cases_of([T((2, 3, 4)), 1], [T((2, 3, 4)), -1], [T((0, 5)), 0]), kind="scalar")
op("aten::sym_numel", lambda t: t.numel(), cases_of([T((2, 3, 4))], [T(())], [T((0, 5))]),
   kind="scalar")
op("aten::_local_scalar_dense", lambda t: t.item(),
   cases_of([T(())], [T((1, 1))]), (F32, I64, B), kind="scalar")
op("executorch_prim::et_view.default", lambda t, size: t.reshape(size),
   cases_of([T((2, 3, 4)), [6, 4]], [T((2, 3, 4)), [-1, 2]], [T(()), [1]], [T((0, 3)), [3, 0]]),
   (F32, I64), kind="view")

RECORDS = {r.name: r for r in OPS}
assert len(RECORDS) == len(OPS), "duplicate records"


# ---- the runner ------------------------------------------------------------------------


def to_torch(v):
    if isinstance(v, np.ndarray):
        return torch.from_numpy(np.array(v, copy=True))
    if isinstance(v, list):
        return [to_torch(x) for x in v]
    return v


def tolerance(rec: Op, dt: np.dtype) -> float:
    if dt == np.float64:
        return max(1e-10, rec.tol if rec.tol > 1e-5 else 0)
    if dt == np.float16:
        return 2e-3
    return rec.tol


def compare(got: np.ndarray, want: np.ndarray, tol: float, ctx: str) -> None:
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=ctx)
    else:
        np.testing.assert_array_equal(got, want, err_msg=ctx)


def garbage(shape, dt) -> np.ndarray:
    """A fresh output filled with junk, so a kernel that forgets to write shows up."""
    dt = np.dtype(dt)
    fill = 7 if dt.kind in "iu" else (True if dt == np.bool_ else np.nan)
    return np.full(shape, fill, dt)


def as_list(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def run_tensor_case(rec: Op, case: Case, dt) -> None:
    entry = get_kernel(rec.name)
    args = case.args
    ctx = f"{rec.name} dtype={np.dtype(dt)} args={_describe(args)}"
    snapshot = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expected = [t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
                for t in as_list(rec.ref(*to_torch(args)))]
    if case.out_dtype is not None:
        expected = [t.to(TORCH_DTYPE[_st(case.out_dtype)]) for t in expected]
    outs = [garbage(tuple(t.shape), np_dtype(t.dtype)) for t in expected]
    if rec.kind == "list_out":
        got = entry.fn(*args, outs)
    else:
        assert entry.num_args == len(args) + len(outs), f"{ctx}: arity {entry.num_args}"
        got = entry.fn(*args, *outs)
    got = as_list(got)
    assert len(got) == len(outs), f"{ctx}: {len(got)} results for {len(outs)} outputs"
    for i, (g, o, e) in enumerate(zip(got, outs, expected)):
        assert isinstance(g, np.ndarray), f"{ctx}: result {i} is {type(g).__name__}"
        assert g.shape == tuple(e.shape), f"{ctx}: result {i} shape {g.shape} != {tuple(e.shape)}"
        assert g.dtype == o.dtype, f"{ctx}: result {i} dtype {g.dtype} != out dtype {o.dtype}"
        if g is not o:  # the runtime copies a returned array into the out slot
            np.copyto(o, g, casting="unsafe")
        compare(o, e.numpy(), tolerance(rec, np.dtype(o.dtype) if o.dtype.kind == "f" else dt),
                f"{ctx} result {i}")
    for a, s in zip(args, snapshot):  # kernels are pure: inputs untouched
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, s, err_msg=f"{ctx}: input was modified")


def _st(dt) -> ScalarType:
    from edgetorch.schema.scalar_type import from_numpy_dtype

    return from_numpy_dtype(np.dtype(dt))


def _describe(args) -> str:
    def d(a):
        if isinstance(a, np.ndarray):
            return f"<{a.dtype}{list(a.shape)}>"
        if isinstance(a, list):
            return "[" + ", ".join(d(x) for x in a) + "]"
        return repr(a)

    return "(" + ", ".join(d(a) for a in args) + ")"


def run_scalar_case(rec: Op, case: Case, dt) -> None:
    entry = get_kernel(rec.name)
    expected = rec.ref(*to_torch(case.args))
    got = entry.fn(*case.args)
    ctx = f"{rec.name}{_describe(case.args)}"
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
    compare(got, expected.numpy(), 0, rec.name)


def cases_for(rec: Op, dt) -> list[Case]:
    rng = np.random.default_rng(zlib.crc32(f"{rec.name}{np.dtype(dt)}".encode()))
    out = [c if isinstance(c, Case) else Case(list(c)) for c in rec.cases(rng, dt)]
    if dt == rec.dtypes[0]:
        out += [Case(list(c)) for c in rec.extra.get("extra_cases", [])]
    return out


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_kernel_matches_torch(name):
    rec = RECORDS[name]
    runner = {"tensor": run_tensor_case, "list_out": run_tensor_case,
              "scalar": run_scalar_case, "view": run_view_case}[rec.kind]
    n = 0
    for dt in rec.dtypes:
        for case in cases_for(rec, dt):
            runner(rec, case, dt)
            n += 1
    assert n > 0


# ---- coverage and conventions ----------------------------------------------------------

NAMESPACES = ("aten::", "dim_order_ops::", "executorch_prim::")


def test_every_kernel_has_a_record():
    missing = [n for n in operator_names() if n.startswith(NAMESPACES) and n not in RECORDS]
    assert not missing, f"registered kernels without a test record: {missing}"


def test_every_record_is_registered():
    unknown = [n for n in RECORDS if n not in operator_names()]
    assert not unknown, f"records for operators that are not registered: {unknown}"


def _torch_schema(name: str):
    ns, rest = name.split("::")
    op_name, _, ov = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), op_name)
    return getattr(packet, ov or "default")._schema


# ExecuTorch's own schemas (exir/passes/dim_order_ops_registry.py, prim_ops/register_prim_ops.cpp)
ET_ARITY = {
    "dim_order_ops::_to_dim_order_copy.out": ["self", "non_blocking", "dim_order", "out"],
    "dim_order_ops::_clone_dim_order.out": ["self", "non_blocking", "dim_order", "out"],
    "dim_order_ops::_empty_dim_order.out": ["size", "dim_order", "out"],
    "executorch_prim::et_view.default": ["self", "size"],
    "executorch_prim::sym_ite.Scalar": ["b", "t", "f"],
}


@pytest.mark.parametrize("name", sorted(n for n in RECORDS if n.startswith("aten::")))
def test_kernel_signature_matches_torch_schema(name):
    """Schema order, kwarg-only and out arguments included: the runtime's calling convention."""
    import inspect

    schema = _torch_schema(name)
    expected = [a.name for a in schema.arguments]
    params = [p.name for p in inspect.signature(get_kernel(name).fn).parameters.values()]
    assert get_kernel(name).num_args == len(expected), (name, params, expected)
    assert params == expected, (name, params, expected)


def test_executorch_op_signatures():
    import inspect

    for name, expected in ET_ARITY.items():
        params = [p.name for p in inspect.signature(get_kernel(name).fn).parameters.values()]
        assert params == expected, (name, params)
    for name in operator_names():
        if name.startswith("executorch_prim::") and name not in ET_ARITY:
            unary_ops = ("neg", "sym_float", "sym_int", "ceil", "round", "trunc", "sym_not")
            want = 1 if name.split("::")[1].split(".")[0] in unary_ops else 2
            assert get_kernel(name).num_args == want, name


# ---- layouts ---------------------------------------------------------------------------


def channels_last(x: np.ndarray) -> np.ndarray:
    """The same logical tensor, stored NHWC (a non-contiguous NCHW view)."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_convolution_channels_last_input_and_out(groups):
    rng = np.random.default_rng(0)
    x = channels_last(rng.standard_normal((2, 4, 9, 9)).astype(F32))
    w = rng.standard_normal((8, 4 // groups, 3, 3)).astype(F32)
    b = rng.standard_normal(8).astype(F32)
    assert not x.flags.c_contiguous
    args = [x, w, b, [2, 1], [1, 1], [1, 1], False, [0, 0], groups]
    want = A.convolution.default(*to_torch(args)).numpy()
    out = channels_last(np.zeros(want.shape, F32))
    got = get_kernel("aten::convolution.out").fn(*args, out)
    if got is not out:
        np.copyto(out, got)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_elementwise_channels_last():
    rng = np.random.default_rng(1)
    a = channels_last(rng.standard_normal((2, 3, 4, 5)).astype(F32))
    b = rng.standard_normal((2, 3, 4, 5)).astype(F32)
    want = (torch.from_numpy(a.copy()) + 2 * torch.from_numpy(b)).numpy()
    out = channels_last(np.zeros((2, 3, 4, 5), F32))
    got = get_kernel("aten::add.out").fn(a, b, 2, out)
    if got is not out:
        np.copyto(out, got)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    got = get_kernel("aten::relu.out").fn(a, np.zeros((2, 3, 4, 5), F32))
    np.testing.assert_array_equal(got, np.maximum(a, 0))


def test_to_dim_order_copy_into_channels_last_out():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4, 5)).astype(F32)
    out = channels_last(np.zeros((2, 3, 4, 5), F64))
    got = get_kernel("dim_order_ops::_to_dim_order_copy.out").fn(x, False, [0, 2, 3, 1], out)
    assert got is out and out.strides[1] == 8
    np.testing.assert_array_equal(out, x.astype(F64))


def test_erf_accuracy():
    from edgetorch.kernels.portable.elementwise import erf

    xs = np.concatenate([np.linspace(-7, 7, 20001), [0.0, -0.0, 1e-300, np.inf, -np.inf]])
    want = torch.special.erf(torch.from_numpy(xs)).numpy()
    np.testing.assert_allclose(erf(xs), want, rtol=1e-14, atol=1e-15)
    assert np.isnan(erf(np.array([np.nan])))[0]
