"""CMSIS-NN's fixed-point helpers (``arm_nnsupportfunctions.h``), on NumPy int64 arrays.

Each function replays the C code of the portable (no DSP, no MVE) build bit for bit: int32
arithmetic wraps (as gcc's code does on two's-complement targets), C's integer division
truncates toward zero, and ``arm_nn_requantize`` is the default double-rounding variant
(``CMSIS_NN_USE_SINGLE_ROUNDING`` unset, as ExecuTorch builds it). Arguments broadcast, so a
per-channel multiplier/shift is an array along the channel axis. Values stay int64 holding
int32 values; callers cast at the end.
"""

from __future__ import annotations

import numpy as np

I64 = np.int64
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def wrap32(x) -> np.ndarray:
    """An int64 array's values as C's int32 would hold them (two's-complement wrap)."""
    x = np.asarray(x, dtype=I64)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def _trunc_div(a: np.ndarray, b: int) -> np.ndarray:
    """C's ``a / b`` for a positive ``b``: the quotient rounded toward zero."""
    q = np.abs(a) // b
    return np.where(a < 0, -q, q)


def doubling_high_mult_no_sat(m1, m2) -> np.ndarray:
    """``arm_nn_doubling_high_mult_no_sat``: ``(m1 * m2 + 2^30) >> 31`` kept to 32 bits."""
    prod = np.asarray(m1, dtype=I64) * np.asarray(m2, dtype=I64) + (1 << 30)
    return wrap32(prod >> 31)


def doubling_high_mult(m1, m2) -> np.ndarray:
    """``arm_nn_doubling_high_mult`` (``MUL_SAT``): round half away from zero, INT32_MIN *
    INT32_MIN saturated to INT32_MAX."""
    m1, m2 = np.asarray(m1, dtype=I64), np.asarray(m2, dtype=I64)
    nudge = np.where((m1 < 0) ^ (m2 < 0), 1 - (1 << 30), 1 << 30)
    result = wrap32(_trunc_div(m1 * m2 + nudge, 1 << 31))
    return np.where((m1 == INT32_MIN) & (m2 == INT32_MIN), INT32_MAX, result)


def divide_by_power_of_two(dividend, exponent) -> np.ndarray:
    """``arm_nn_divide_by_power_of_two`` (``DIV_POW2``): rounding right shift, midpoints
    away from zero."""
    x = np.asarray(dividend, dtype=I64)
    e = np.asarray(exponent, dtype=I64)
    mask = (np.left_shift(I64(1), e)) - 1
    remainder = x & mask
    result = np.right_shift(x, e)
    threshold = (mask >> 1) + (result < 0)
    return result + (remainder > threshold)


def requantize(val, multiplier, shift) -> np.ndarray:
    """``arm_nn_requantize``: ``val * multiplier * 2^shift`` in Q31 with CMSIS-NN's two
    roundings (the left shift is an int32 multiply, which wraps)."""
    shift = np.asarray(shift, dtype=I64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    scaled = wrap32(np.asarray(val, dtype=I64) * np.left_shift(I64(1), left))
    return divide_by_power_of_two(doubling_high_mult_no_sat(scaled, multiplier), right)


def mult_by_power_of_two(val, exp: int) -> np.ndarray:
    """``arm_nn_mult_by_power_of_two`` (``MUL_POW2``): a saturating left shift."""
    val = np.asarray(val, dtype=I64)
    thresh = (1 << (31 - exp)) - 1
    result = wrap32(val << exp)
    result = np.where(val > thresh, INT32_MAX, result)
    return np.where(val < -thresh, INT32_MIN, result)


# arm_nn_exp_on_negative_values: exp(x) for x <= 0 in Q5.26, one factor per remainder bit
_EXP_FACTORS = (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)


def exp_on_negative_values(val) -> np.ndarray:
    """``arm_nn_exp_on_negative_values`` (``EXP_ON_NEG``): exp of a Q5.26 value <= 0, Q0.31."""
    val = np.asarray(val, dtype=I64)
    mul, div = doubling_high_mult, divide_by_power_of_two
    mod_minus_quarter = (val & ((1 << 24) - 1)) - (1 << 24)
    remainder = wrap32(mod_minus_quarter - val)
    x = wrap32(wrap32(mod_minus_quarter << 5) + (1 << 28))
    x2 = mul(x, x)
    inner = wrap32(div(mul(wrap32(div(mul(x2, x2), 2) + mul(x2, x)), 715827883) + x2, 1))
    result = wrap32(1895147668 + mul(1895147668, wrap32(x + inner)))
    for bit, factor in enumerate(_EXP_FACTORS, start=24):
        result = np.where(remainder & (1 << bit), mul(result, factor), result)
    return np.where(val == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(val) -> np.ndarray:
    """``arm_nn_one_over_one_plus_x_for_x_in_0_1`` (``ONE_OVER1``): Newton-Raphson 1/(1+x)."""
    mul, pow2 = doubling_high_mult, mult_by_power_of_two
    total = np.asarray(val, dtype=I64) + INT32_MAX
    half_denominator = wrap32(_trunc_div(total + np.where(total >= 0, 1, -1), 2))
    x = wrap32(1515870810 + mul(half_denominator, -1010580540))
    for _ in range(3):
        x = wrap32(x + pow2(mul(x, wrap32((1 << 29) - mul(half_denominator, x))), 2))
    return pow2(x, 1)


def count_leading_zeros(x) -> np.ndarray:
    """``CLZ`` of int32 values read as uint32 (32 for zero)."""
    u = np.asarray(x, dtype=I64) & 0xFFFFFFFF
    return 32 - np.frexp(u.astype(np.float64))[1].astype(I64)  # exact: u < 2^53


def clamp(x, lo, hi) -> np.ndarray:
    return np.minimum(np.maximum(x, lo), hi)
