"""Elementwise kernels: unary and binary math, comparisons, logical ops, where, clamp, activations.

Binary ops compute in the dtype torch's type promotion picks for the operands (half and
bfloat16 in float32, as torch's CPU kernels do) and write the result as ``out.dtype``.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import kernel
from ._util import (
    BOOL,
    FLOAT64,
    cast,
    finish,
    float_compute,
    into,
    invalid,
    is_bool,
    is_float,
    is_int,
    opmath,
    result_type,
    scalar,
    wrap_dim,
)

# ---- special functions -----------------------------------------------------------------

# erf by Taylor expansion around centres 0, 1/8, ..., 6: erf(c + d) = sum_n a_n(c) d^n with
# a_0 = erf(c) (math.erf, once per centre at import) and, from erf' = 2/sqrt(pi) exp(-x^2),
# a_{n+1} = 2/sqrt(pi) exp(-c^2) (-1)^n H_n(c) / (n+1)!  (H_n: physicists' Hermite polynomials).
# |d| <= 1/16: degree 11 is exact to ~1e-15 (float64), degree 7 to ~2e-11 (float32 and below).
# Beyond 6, erf is 1 to double precision.
_ERF_STEP = 0.125
_ERF_CENTRES = np.arange(int(6 / _ERF_STEP) + 1) * _ERF_STEP
_ERF_TABLES: dict[int, np.ndarray] = {}


def _erf_table(degree: int) -> np.ndarray:
    if degree not in _ERF_TABLES:
        c = _ERF_CENTRES
        coef = np.zeros((degree + 1, c.size))
        coef[0] = [math.erf(v) for v in c]
        g = (2.0 / math.sqrt(math.pi)) * np.exp(-c * c)
        h_prev, h = np.zeros_like(c), np.ones_like(c)
        for n in range(degree):
            coef[n + 1] = g * (-1) ** n * h / math.factorial(n + 1)
            h_prev, h = h, 2 * c * h - 2 * n * h_prev
        _ERF_TABLES[degree] = coef
    return _ERF_TABLES[degree]


def erf(x: np.ndarray, *, precise: bool = True) -> np.ndarray:
    """Vectorised erf in float64 (abs error ~1e-16; ~2e-11 with ``precise=False``)."""
    x = np.asarray(x, dtype=FLOAT64)
    coef = _erf_table(11 if precise else 7)
    a = np.abs(x)
    with np.errstate(invalid="ignore"):
        k = np.minimum(np.rint(np.nan_to_num(a, posinf=6.0) * (1 / _ERF_STEP)),
                       _ERF_CENTRES.size - 1).astype(np.intp)
    d = a - _ERF_CENTRES.take(k)
    r = coef[-1].take(k)
    for j in range(coef.shape[0] - 2, -1, -1):
        r = r * d + coef[j].take(k)
    r = np.where(a >= 6.0, 1.0, r)
    r = np.where(np.isnan(a), np.nan, r)
    return np.copysign(r, x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


# ---- unary -----------------------------------------------------------------------------


def _unary_float(name: str, fn) -> None:
    """An op that takes any real input and produces a float (ints go to float32)."""

    def k(self, out):
        x = self.astype(float_compute(self.dtype), copy=False)
        with np.errstate(all="ignore"):
            return finish(fn(x), out)

    k.__name__ = k.__qualname__ = name.split("::")[1].split(".")[0]
    kernel(name)(k)


def _erf_like(x: np.ndarray) -> np.ndarray:
    return erf(x, precise=x.dtype == FLOAT64).astype(x.dtype)


for _name, _fn in {
    "aten::exp.out": np.exp,
    "aten::expm1.out": np.expm1,
    "aten::log.out": np.log,
    "aten::log1p.out": np.log1p,
    "aten::log2.out": np.log2,
    "aten::log10.out": np.log10,
    "aten::sqrt.out": np.sqrt,
    "aten::rsqrt.out": lambda x: 1 / np.sqrt(x),
    "aten::reciprocal.out": lambda x: 1 / x,
    "aten::sigmoid.out": _sigmoid,
    "aten::tanh.out": np.tanh,
    "aten::erf.out": _erf_like,
    "aten::sin.out": np.sin,
    "aten::cos.out": np.cos,
    "aten::tan.out": np.tan,
    "aten::asin.out": np.arcsin,
    "aten::acos.out": np.arccos,
    "aten::atan.out": np.arctan,
    "aten::sinh.out": np.sinh,
    "aten::cosh.out": np.cosh,
    "aten::asinh.out": np.arcsinh,
    "aten::acosh.out": np.arccosh,
    "aten::atanh.out": np.arctanh,
}.items():
    _unary_float(_name, _fn)


def _same_dtype_unary(x: np.ndarray) -> np.ndarray:
    return x.astype(opmath(x.dtype), copy=False)


@kernel("aten::abs.out")
def abs_out(self, out):
    return finish(np.abs(_same_dtype_unary(self)), out)


@kernel("aten::neg.out")
def neg_out(self, out):
    if is_bool(self.dtype):
        raise invalid("neg is not supported on bool tensors; use logical_not")
    return finish(np.negative(_same_dtype_unary(self)), out)


@kernel("aten::sign.out")
def sign_out(self, out):
    if is_bool(self.dtype):
        return finish(self, out)
    x = _same_dtype_unary(self)
    r = np.sign(x)
    if is_float(x.dtype):
        r = np.where(np.isnan(x), 0, r)  # torch: sign(nan) == 0
    return finish(r, out)


def _rounding(name: str, fn) -> None:
    def k(self, out):
        if not is_float(self.dtype):
            return finish(self, out)  # integers are already whole
        return finish(fn(_same_dtype_unary(self)), out)

    k.__name__ = k.__qualname__ = name.split("::")[1].split(".")[0]
    kernel(name)(k)


_rounding("aten::floor.out", np.floor)
_rounding("aten::ceil.out", np.ceil)
_rounding("aten::round.out", np.round)  # half to even, like torch's nearbyint
_rounding("aten::trunc.out", np.trunc)


@kernel("aten::bitwise_not.out")
def bitwise_not_out(self, out):
    if is_float(self.dtype):
        raise invalid("bitwise_not is only defined for integer and bool tensors")
    return finish(np.invert(self), out)


@kernel("aten::logical_not.out")
def logical_not_out(self, out):
    return finish(np.logical_not(self), out)


@kernel("aten::isnan.out")
def isnan_out(self, out):
    if not is_float(self.dtype):
        return finish(np.zeros(self.shape, BOOL), out)
    return finish(np.isnan(self.astype(opmath(self.dtype), copy=False)), out)


@kernel("aten::isinf.out")
def isinf_out(self, out):
    if not is_float(self.dtype):
        return finish(np.zeros(self.shape, BOOL), out)
    return finish(np.isinf(self.astype(opmath(self.dtype), copy=False)), out)


# ---- activations -----------------------------------------------------------------------


@kernel("aten::relu.out")
def relu_out(self, out):
    if is_bool(self.dtype):
        raise invalid("relu is not supported on bool tensors")
    x = _same_dtype_unary(self)
    # NaN propagates, as in torch
    return finish(np.maximum(x, x.dtype.type(0), out=into(out, x.shape, x.dtype)), out)


@kernel("aten::hardtanh.out")
def hardtanh_out(self, min_val, max_val, out):
    if self.dtype.kind == "u" and (min_val < 0 or max_val < 0):
        raise invalid("hardtanh: an unsigned tensor cannot be clamped to negative limits")
    x = _same_dtype_unary(self)
    lo, hi = scalar(min_val, x.dtype), scalar(max_val, x.dtype)
    # one pass into out (np.clip propagates NaN, as minimum(maximum()) and torch do)
    return finish(np.clip(x, lo, hi, out=into(out, x.shape, x.dtype)), out)


@kernel("aten::gelu.out")
def gelu_out(self, approximate, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            beta = x.dtype.type(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5)
            kappa = x.dtype.type(0.044715)
            inner = beta * (x + kappa * (x * x * x))
            r = x.dtype.type(0.5) * x * (1 + np.tanh(inner))
        elif approximate == "none":
            e = erf(x * (1 / math.sqrt(2.0)), precise=x.dtype == FLOAT64).astype(x.dtype)
            r = x * x.dtype.type(0.5) * (1 + e)
        else:
            raise invalid(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return finish(r, out)


@kernel("aten::silu.out")
def silu_out(self, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    with np.errstate(all="ignore"):
        return finish(x * _sigmoid(x), out)


@kernel("aten::hardswish.out")
def hardswish_out(self, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    return finish(x * np.clip(x + 3, 0, 6) / 6, out)


@kernel("aten::hardsigmoid.out")
def hardsigmoid_out(self, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    return finish(np.clip(x + 3, 0, 6) / 6, out)


@kernel("aten::leaky_relu.out")
def leaky_relu_out(self, negative_slope, out):
    x = _same_dtype_unary(self)
    return finish(np.where(x > 0, x, x * scalar(negative_slope, x.dtype)), out)


@kernel("aten::elu.out")
def elu_out(self, alpha, scale, input_scale, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    t = x.dtype.type
    with np.errstate(all="ignore"):
        neg = np.expm1(x * t(input_scale)) * t(alpha * scale)
        return finish(np.where(x > 0, x * t(scale), neg), out)


@kernel("aten::logit.out")
def logit_out(self, eps, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    with np.errstate(all="ignore"):
        return finish(np.log(x / (1 - x)), out)


@kernel("aten::glu.out")
def glu_out(self, dim, out):
    x = self.astype(float_compute(self.dtype), copy=False)
    d = wrap_dim(dim, self.ndim)
    n = x.shape[d]
    if n % 2:
        raise invalid(f"glu: halving dimension {dim} needs an even size, got {n}")
    a, b = np.split(x, 2, axis=d)
    with np.errstate(all="ignore"):
        return finish(a * _sigmoid(b), out)


# ---- binary arithmetic -----------------------------------------------------------------


def _operands(*xs):
    """Operands cast to the compute dtype of their torch result type; returns (ct, *arrays)."""
    rt = result_type(*xs)
    ct = opmath(rt)
    return (rt, *[None if x is None else cast(x, ct) for x in xs])


def _alpha(alpha, ct):
    if (is_int(ct) or is_bool(ct)) and isinstance(alpha, float) and not alpha.is_integer():
        raise invalid(f"alpha {alpha} must be an integer for integer tensors")
    return scalar(alpha, ct)


def _add(a, b, alpha, out):
    _, a, b = _operands(a, b)
    if alpha != 1:
        b = b * _alpha(alpha, b.dtype)
    with np.errstate(all="ignore"):
        o = into(out, np.broadcast_shapes(a.shape, b.shape), a.dtype) if a.dtype == b.dtype \
            else None
        return finish(np.add(a, b, out=o), out)


def _sub(a, b, alpha, out):
    _, a, b = _operands(a, b)
    if is_bool(a.dtype):
        raise invalid("subtraction of bool tensors is not supported; use logical_xor")
    if alpha != 1:
        b = b * _alpha(alpha, b.dtype)
    with np.errstate(all="ignore"):
        return finish(np.subtract(a, b), out)


@kernel("aten::add.out")
def add_out(self, other, alpha, out):
    return _add(self, other, alpha, out)


@kernel("aten::add.Scalar_out")
def add_scalar_out(self, other, alpha, out):
    return _add(self, other, alpha, out)


@kernel("aten::sub.out")
def sub_out(self, other, alpha, out):
    return _sub(self, other, alpha, out)


@kernel("aten::sub.Scalar_out")
def sub_scalar_out(self, other, alpha, out):
    return _sub(self, other, alpha, out)


@kernel("aten::rsub.Scalar_out")
def rsub_scalar_out(self, other, alpha, out):
    return _sub(other, self, alpha, out)


@kernel("aten::mul.out", "aten::mul.Scalar_out")
def mul_out(self, other, out):
    _, a, b = _operands(self, other)
    with np.errstate(all="ignore"):
        return finish(np.multiply(a, b), out)


def _check_int_divisor(b: np.ndarray) -> None:
    if is_int(b.dtype) and np.any(b == 0):
        raise invalid("integer division by zero")


def _trunc_div_int(a, b):
    q = np.floor_divide(a, b)
    fix = (a - q * b != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _div(a, b, rounding_mode, out):
    if rounding_mode is None:
        rt = result_type(a, b)
        ct = float_compute(rt)
        a, b = cast(a, ct), cast(b, ct)
        with np.errstate(all="ignore"):
            return finish(np.true_divide(a, b), out)
    if rounding_mode not in ("trunc", "floor"):
        raise invalid(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    rt, a, b = _operands(a, b)
    if is_bool(rt):
        a, b = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(all="ignore"):
        if is_float(a.dtype):
            r = np.trunc(a / b) if rounding_mode == "trunc" else np.floor_divide(a, b)
        else:
            _check_int_divisor(b)
            r = _trunc_div_int(a, b) if rounding_mode == "trunc" else np.floor_divide(a, b)
    return finish(r, out)


@kernel("aten::div.out", "aten::div.Scalar_out")
def div_out(self, other, out):
    return _div(self, other, None, out)


@kernel("aten::div.out_mode", "aten::div.Scalar_mode_out")
def div_mode_out(self, other, rounding_mode, out):
    return _div(self, other, rounding_mode, out)


@kernel("aten::floor_divide.out")
def floor_divide_out(self, other, out):
    return _div(self, other, "floor", out)


def _remainder(a, b, out, fn):
    _, a, b = _operands(a, b)
    with np.errstate(all="ignore"):
        if not is_float(a.dtype):
            _check_int_divisor(b)
        return finish(fn(a, b), out)


@kernel("aten::remainder.Tensor_out", "aten::remainder.Scalar_out")
def remainder_out(self, other, out):
    return _remainder(self, other, out, np.remainder)  # sign of the divisor, like Python


@kernel("aten::fmod.Tensor_out", "aten::fmod.Scalar_out")
def fmod_out(self, other, out):
    return _remainder(self, other, out, np.fmod)  # sign of the dividend, like C


def _int_pow(base: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """Integer power with torch's answers for negative exponents (0 unless |base| == 1)."""
    base, exp = np.broadcast_arrays(base, exp)
    neg = exp < 0
    with np.errstate(all="ignore"):
        r = np.power(base, np.where(neg, 0, exp))
    if np.any(neg):
        odd = (exp % 2) != 0
        special = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
        r = np.where(neg, special.astype(r.dtype), r)
    return r


def _pow(a, b, out):
    rt, a, b = _operands(a, b)
    if is_bool(rt):
        a, b = a.astype(np.int64), b.astype(np.int64)
    if is_int(a.dtype):
        return finish(_int_pow(a, b), out)
    with np.errstate(all="ignore"):
        return finish(np.power(a, b), out)


@kernel("aten::pow.Tensor_Scalar_out")
def pow_tensor_scalar_out(self, exponent, out):
    if is_int(self.dtype) and isinstance(exponent, int) and exponent < 0:
        raise invalid("integers to negative integer powers are not allowed")
    return _pow(self, exponent, out)


@kernel("aten::pow.Tensor_Tensor_out")
def pow_tensor_tensor_out(self, exponent, out):
    return _pow(self, exponent, out)


@kernel("aten::pow.Scalar_out")
def pow_scalar_out(self, exponent, out):
    return _pow(self, exponent, out)


@kernel("aten::minimum.out")
def minimum_out(self, other, out):
    _, a, b = _operands(self, other)
    return finish(np.minimum(a, b), out)


@kernel("aten::maximum.out")
def maximum_out(self, other, out):
    _, a, b = _operands(self, other)
    return finish(np.maximum(a, b), out)


@kernel("aten::atan2.out")
def atan2_out(self, other, out):
    ct = float_compute(result_type(self, other))
    return finish(np.arctan2(cast(self, ct), cast(other, ct)), out)


def _bitwise(name_t: str, name_s: str, fn) -> None:
    def k(self, other, out):
        rt, a, b = _operands(self, other)
        if is_float(rt):
            raise invalid(f"{name_t.split('::')[1]} is only defined for integer and bool tensors")
        return finish(fn(a, b), out)

    k.__name__ = k.__qualname__ = name_t.split("::")[1].split(".")[0]
    kernel(name_t, name_s)(k)


_bitwise("aten::bitwise_and.Tensor_out", "aten::bitwise_and.Scalar_out", np.bitwise_and)
_bitwise("aten::bitwise_or.Tensor_out", "aten::bitwise_or.Scalar_out", np.bitwise_or)
_bitwise("aten::bitwise_xor.Tensor_out", "aten::bitwise_xor.Scalar_out", np.bitwise_xor)


def _shift(a, b, left: bool, out):
    """torch's shifts: a shift by a negative amount or by the bit width or more gives 0 (left),
    or the sign fill (right), instead of C's undefined behaviour."""
    rt, a, b = _operands(a, b)
    if not is_int(rt):
        raise invalid(f"bitwise shifts are only defined for integer tensors, got {rt}")
    bits = rt.itemsize * 8
    a, b = np.broadcast_arrays(a, b)
    bad = (b < 0) | (b >= bits)
    amount = np.where(bad, 0, b).astype(rt, copy=False)
    if left:
        r = np.where(bad, 0, np.left_shift(a, amount))
    else:
        r = np.where(bad, np.right_shift(a, bits - 1) if rt.kind == "i" else 0,
                     np.right_shift(a, amount))
    return finish(r.astype(rt, copy=False), out)


@kernel("aten::bitwise_left_shift.Tensor_out", "aten::bitwise_left_shift.Tensor_Scalar_out")
def bitwise_left_shift_out(self, other, out):
    return _shift(self, other, True, out)


@kernel("aten::bitwise_right_shift.Tensor_out", "aten::bitwise_right_shift.Tensor_Scalar_out")
def bitwise_right_shift_out(self, other, out):
    return _shift(self, other, False, out)


@kernel("aten::_conj_physical.out")
def conj_physical_out(self, out):
    """The complex conjugate (a copy for real tensors)."""
    return finish(np.conj(self) if self.dtype.kind == "c" else self, out)


# ---- comparisons and logical ops ------------------------------------------------------


def _comparison(op: str, fn) -> None:
    def k(self, other, out):
        _, a, b = _operands(self, other)
        return finish(fn(a, b), out)

    k.__name__ = k.__qualname__ = op
    kernel(f"aten::{op}.Scalar_out", f"aten::{op}.Tensor_out")(k)


_comparison("eq", np.equal)
_comparison("ne", np.not_equal)
_comparison("lt", np.less)
_comparison("le", np.less_equal)
_comparison("gt", np.greater)
_comparison("ge", np.greater_equal)


def _logical(name: str, fn) -> None:
    def k(self, other, out):
        return finish(fn(self.astype(BOOL), other.astype(BOOL)), out)

    k.__name__ = k.__qualname__ = name.split("::")[1].split(".")[0]
    kernel(name)(k)


_logical("aten::logical_and.out", np.logical_and)
_logical("aten::logical_or.out", np.logical_or)
_logical("aten::logical_xor.out", np.logical_xor)


@kernel("aten::where.self_out")
def where_self_out(condition, self, other, out):
    _, a, b = _operands(self, other)
    return finish(np.where(condition.astype(BOOL, copy=False), a, b), out)


# ---- clamp -----------------------------------------------------------------------------


def _clamp(self, lo, hi, out):
    if lo is None and hi is None:
        raise invalid("clamp: at least one of 'min' or 'max' must not be None")
    _, x, lo, hi = _operands(self, lo, hi)
    r = x
    if lo is not None:
        r = np.maximum(r, lo)
    if hi is not None:
        r = np.minimum(r, hi)
    return finish(r, out)


@kernel("aten::clamp.out")
def clamp_out(self, min, max, out):
    return _clamp(self, min, max, out)


@kernel("aten::clamp.Tensor_out")
def clamp_tensor_out(self, min, max, out):
    return _clamp(self, min, max, out)

