"""Elementwise records: unary math, activations, binary arithmetic, comparisons, clamp."""

from __future__ import annotations

import numpy as np
from kernel_harness import (
    C64,
    C128,
    F32,
    I8,
    I32,
    I64,
    MIXED,
    U8,
    B,
    F,
    T,
    arr,
    binary,
    cases_of,
    isfloat,
    isint,
    nonzero,
    num_scalars,
    op,
    tensor_scalar,
    unary,
)

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

    op(f"aten::{_n}.out", F(f"{_n}.default"), _gen)

op("aten::abs.out", F("abs.default"), unary())
op("aten::neg.out", F("neg.default"), unary())
op("aten::sign.out", F("sign.default"),
   lambda rng, dt: unary()(rng, dt) + ([[np.array([np.nan, -0.0, 0.0, 2.0], dt)]]
                                       if isfloat(dt) else []))
_HALVES = [[np.array([0.5, 1.5, 2.5, -0.5, -2.5, -1.2, 3.7], F32)]]
for _n in ("floor", "ceil", "round", "trunc"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       lambda rng, dt: [[np.asarray(a * 3) if isfloat(dt) else a]
                        for (a,) in unary()(rng, dt)]
       + (_HALVES if dt == F32 else []))
op("aten::bitwise_not.out", F("bitwise_not.default"), unary())
op("aten::logical_not.out", F("logical_not.default"), unary())


def _with_nonfinite(rng, dt):
    base = unary()(rng, dt)
    if isfloat(dt):
        base.append([np.array([np.nan, np.inf, -np.inf, 1.0], dt)])
    return base


op("aten::isnan.out", F("isnan.default"), _with_nonfinite)
op("aten::isinf.out", F("isinf.default"), _with_nonfinite)

# activations
op("aten::relu.out", F("relu.default"), unary())
op("aten::hardtanh.out", F("hardtanh.default"), lambda rng, dt: unary(-4, 8, variants=[(1.0, 4.0), (0.0, 6.0)] if dt == U8
                         else [(-1.0, 1.0), (0.0, 6.0)])(rng, dt))
op("aten::gelu.out", F("gelu.default"), unary(-6, 6, variants=[("none",), ("tanh",)]))
op("aten::silu.out", F("silu.default"), unary(-8, 8))
op("aten::hardswish.out", F("hardswish.default"), unary(-5, 5))
op("aten::hardsigmoid.out", F("hardsigmoid.default"), unary(-5, 5))
op("aten::leaky_relu.out", F("leaky_relu.default"), unary(variants=[(0.01,), (0.2,)]))
op("aten::elu.out", F("elu.default"), unary(variants=[(1.0, 1.0, 1.0), (0.5, 2.0, 1.5)]))
op("aten::logit.out", F("logit.default"), unary(0.01, 0.99, variants=[(None,), (0.05,)]))
op("aten::glu.out", F("glu.default"),
   cases_of([T((4, 6)), -1], [T((4, 6)), 0], [T((2, 0, 4)), 2], [T((2, 3, 2)), 2]))

# binary arithmetic
op("aten::add.out", F("add.Tensor"), binary(variants=[(1,), (2,)], mixed=MIXED))
op("aten::sub.out", F("sub.Tensor"), binary(variants=[(1,), (3,)], mixed=MIXED[:3]))
op("aten::mul.out", F("mul.Tensor"), binary(mixed=MIXED))
op("aten::div.out", F("div.Tensor"), binary(rhs=nonzero, mixed=MIXED[:3]))
_MODES = [(None,), ("trunc",), ("floor",)]
op("aten::div.out_mode", F("div.Tensor_mode"),
   lambda rng, dt: binary(rhs=nonzero, variants=_MODES[:1] if dt == B else _MODES,
                          mixed=MIXED[:3])(rng, dt))
op("aten::floor_divide.out", F("floor_divide.default"), binary(rhs=nonzero))
op("aten::remainder.Tensor_out", F("remainder.Tensor"), binary(rhs=nonzero))
op("aten::fmod.Tensor_out", F("fmod.Tensor"), binary(rhs=nonzero))
op("aten::pow.Tensor_Tensor_out", F("pow.Tensor_Tensor"),
   lambda rng, dt: binary(0.5, 3)(rng, dt) + (
       [[np.array([2, -3, 1, -1, 0, 5, -1], dt), np.array([-1, -2, -3, -3, 2, 0, -2], dt)]]
       if dt.kind == "i" else []))
op("aten::minimum.out", F("minimum.default"),
   lambda rng, dt: binary(mixed=MIXED[:3])(rng, dt) + (
       [[np.array([np.nan, 1.0], dt), np.array([0.0, np.nan], dt)]] if isfloat(dt) else []))
op("aten::maximum.out", F("maximum.default"),
   lambda rng, dt: binary(mixed=MIXED[3:])(rng, dt) + (
       [[np.array([np.nan, 1.0], dt), np.array([0.0, np.nan], dt)]] if isfloat(dt) else []))
op("aten::atan2.out", F("atan2.default"), binary())
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    op(f"aten::{_n}.Tensor_out", F(f"{_n}.Tensor"), binary())
    op(f"aten::{_n}.Scalar_out", F(f"{_n}.Scalar"),
       tensor_scalar(lambda dt: [True] if dt == B else [3, 12]))

op("aten::add.Scalar_out", F("add.Scalar"),
   tensor_scalar(num_scalars, variants=[(1,), (2,)]))
op("aten::sub.Scalar_out", F("sub.Scalar"),
   tensor_scalar(lambda dt: [3, 2.5] if dt != F32 else [1.5, -2], variants=[(1,), (2,)]))
op("aten::rsub.Scalar_out", F("rsub.Scalar"),
   tensor_scalar(lambda dt: [3, 2.5] if dt != F32 else [1.5, -2], variants=[(1,), (2,)]))
op("aten::mul.Scalar_out", F("mul.Scalar"), tensor_scalar(num_scalars))
op("aten::div.Scalar_out", F("div.Scalar"),
   tensor_scalar(lambda dt: [3, -2.5, 0.5]))
op("aten::div.Scalar_mode_out", F("div.Scalar_mode"),
   lambda rng, dt: tensor_scalar(lambda dt: [3, -2] if isint(dt) else [3, -2.5],
                                 variants=_MODES[:1] if dt == B else _MODES)(rng, dt))
op("aten::remainder.Scalar_out", F("remainder.Scalar"),
   tensor_scalar(lambda dt: [3, -2] if isint(dt) else [1.5, -2.0]))
op("aten::fmod.Scalar_out", F("fmod.Scalar"),
   tensor_scalar(lambda dt: [3, -2] if isint(dt) else [1.5, -2.0]))
op("aten::pow.Tensor_Scalar_out", F("pow.Tensor_Scalar"),
   tensor_scalar(lambda dt: [2, 3, 0] if isint(dt) else [2, 0.5, 3.0] if dt == B
                 else [2, 0.5, -1, 3.0], 0.5, 3))
op("aten::pow.Scalar_out", F("pow.Scalar"),
   lambda rng, dt: [[s, arr(rng, sh, dt, 0, 3)] for s in (2, 1.5) for sh in ((), (0,), (3, 4))])

# comparisons, logical, where, clamp
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    op(f"aten::{_n}.Tensor_out", F(f"{_n}.Tensor"), binary(-2, 3, mixed=MIXED))
    op(f"aten::{_n}.Scalar_out", F(f"{_n}.Scalar"),
       lambda rng, dt: tensor_scalar(num_scalars, -2, 3)(rng, dt)
       + ([[np.array([44, 1], I8), 300]] if dt == I32 else []))
for _n in ("logical_and", "logical_or", "logical_xor"):
    op(f"aten::{_n}.out", F(f"{_n}.default"), binary(-1, 2, mixed=MIXED[:2]))
op("aten::where.self_out", F("where.self"),
   lambda rng, dt: [[arr(rng, c, B), arr(rng, a, dt), arr(rng, b, dt)]
                    for c, a, b in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()),
                                    ((), (2, 3), (2, 3)), ((0, 2), (2,), (0, 1))]]
   + [[arr(rng, (3,), B), arr(rng, (3,), I32), arr(rng, (3,), F32)]])
op("aten::clamp.out", F("clamp.default"),
   lambda rng, dt: [[arr(rng, s, dt), lo, hi] for s in ((), (0,), (3, 4))
                    for lo, hi in ((-1, 2), (None, 1), (0, None), (2, -1), (-0.5, 0.5))])
op("aten::clamp.Tensor_out", F("clamp.Tensor"),
   lambda rng, dt: [[arr(rng, (3, 4), dt), arr(rng, (4,), dt) - 1, arr(rng, (3, 1), dt) + 1],
                    [arr(rng, (3, 4), dt), None, arr(rng, (), dt)],
                    [arr(rng, (3, 4), dt), arr(rng, (3, 4), dt), None],
                    [arr(rng, (0, 4), dt), arr(rng, (4,), dt), None]])



def _shift_amounts(rng, shape, dt):
    """Shift amounts from -2 to past the bit width (torch gives 0 / the sign fill there)."""
    bits = np.dtype(dt).itemsize * 8 if isint(dt) else 8
    lo = 0 if np.dtype(dt).kind in "ub" else -2
    return np.asarray(rng.integers(lo, bits + 3, size=shape)).astype(dt)


for _n in ("bitwise_left_shift", "bitwise_right_shift"):
    op(f"aten::{_n}.Tensor_out", F(f"{_n}.Tensor"),
       binary(-40, 40, rhs=_shift_amounts, mixed=((I8, I64, (4,), (4,)),), mixed_with=I32))
    op(f"aten::{_n}.Tensor_Scalar_out", F(f"{_n}.Tensor_Scalar"),
       tensor_scalar(lambda dt: [0, 1, 3, 7, 9, -1] if dt.kind != "u" else [0, 1, 3, 7, 9], -40, 40))
op("aten::_conj_physical.out", F("_conj_physical.default"), unary(), other_dtypes=(C64, C128))
