"""The Cortex-M kernels without CMSIS-NN: the fixed-point helpers against exact arithmetic,
the operators ExecuTorch implements without CMSIS-NN (quantize, dequantize, division, the
LUT activation), layouts, and refusals. No torch: the kernels are runtime code."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgetorch.errors import ErrorCode, KernelError
from edgetorch.kernels import KERNELS
from edgetorch.kernels.cortex_m import cmsis
from edgetorch.schema.scalar_type import ScalarType


def call(op: str, *args):
    return KERNELS[f"cortex_m::{op}.out"].fn(*args)


def test_rounding_shift_rounds_half_away_from_zero():
    got = cmsis.divide_by_power_of_two(np.array([5, -5, 6, -6, 7, -7, 3, -3]), 1)
    np.testing.assert_array_equal(got, [3, -3, 3, -3, 4, -4, 2, -2])


def test_requantize_is_the_rounded_product():
    """val * m / 2^31 * 2^shift, rounded twice as CMSIS-NN does: within one unit of the exact
    product, and exactly the rounded value when no rounding is needed in the first step."""
    rng = np.random.default_rng(0)
    vals = rng.integers(-(2**20), 2**20, size=2000)
    mults = rng.integers(2**30, 2**31 - 1, size=2000)
    shifts = rng.integers(-12, 3, size=2000)
    got = cmsis.requantize(vals, mults, shifts)
    exact = vals * mults.astype(np.float64) / 2**31 * np.exp2(shifts.astype(np.float64))
    assert np.abs(got - exact).max() <= 1.0
    # a multiplier of 2^30 is one half; the doubling high multiply rounds halves up
    np.testing.assert_array_equal(cmsis.requantize(np.array([3, -3]), 2**30, 0), [2, -1])
    # and the rounding shift after it rounds them away from zero
    np.testing.assert_array_equal(cmsis.requantize(np.array([6, -6]), 2**30, -1), [2, -2])


def test_int32_wraps_like_c():
    np.testing.assert_array_equal(cmsis.wrap32(np.array([2**31, -(2**31) - 1, 5])),
                                  [-(2**31), 2**31 - 1, 5])
    # the add's left shift by 20 of a large operand wraps, as the C int32 does
    assert cmsis.requantize(np.array([4096]), 2**30, 20)[0] == cmsis.requantize(
        np.array([cmsis.wrap32(4096 << 20)]), 2**30, 0)[0]


def test_fixed_point_exp_and_reciprocal():
    x = -np.arange(0, 16 * 2**26, 2**22, dtype=np.int64)  # Q5.26 in [-16, 0]
    got = cmsis.exp_on_negative_values(x) / 2**31
    np.testing.assert_allclose(got, np.exp(x / 2**26), atol=2e-9, rtol=1e-6)
    assert cmsis.exp_on_negative_values(np.array([0]))[0] == 2**31 - 1
    y = np.arange(0, 2**31 - 1, 2**24, dtype=np.int64)  # Q0.31 in [0, 1)
    got = cmsis.one_over_one_plus_x_for_x_in_0_1(y) / 2**31
    np.testing.assert_allclose(got, 1 / (1 + y / 2**31), rtol=1e-7)
    np.testing.assert_array_equal(cmsis.count_leading_zeros(np.array([0, 1, 2**30, -1])),
                                  [32, 31, 1, 0])


def _softmax_args(scale: float) -> tuple[int, int, int]:
    mantissa, shift = math.frexp(scale * 2**26)
    mult = int(round(mantissa * 2**31))
    return mult, shift, -int(math.floor(31 * 2**26 / 2**shift))


def test_softmax_is_a_softmax():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, size=(5, 17)).astype(np.int8)
    out = np.empty_like(x)
    scale = 0.05
    call("softmax", x, -1, 0, -128, *_softmax_args(scale), out)
    want = np.exp(scale * x) / np.exp(scale * x).sum(axis=1, keepdims=True)
    assert np.abs((out.astype(np.int64) + 128) / 256 - want).max() <= 1 / 256


def test_softmax_walks_the_bytes_of_a_channels_last_tensor():
    """ExecuTorch's kernel hands CMSIS-NN the bytes: a channels-last tensor's rows are its
    channels (the AOT pass only lowers softmax over the last dim of row-major tensors)."""
    rng = np.random.default_rng(2)
    nhwc = rng.integers(-128, 128, size=(1, 3, 3, 3)).astype(np.int8)
    out_nhwc = np.empty_like(nhwc)
    call("softmax", nhwc.transpose(0, 3, 1, 2), -1, 0, -128, *_softmax_args(0.1),
         out_nhwc.transpose(0, 3, 1, 2))
    flat = np.empty_like(nhwc)
    call("softmax", nhwc, -1, 0, -128, *_softmax_args(0.1), flat)
    np.testing.assert_array_equal(out_nhwc, flat)


def test_division_rounds_half_away_and_guards_zero():
    a = np.array([5, -5, 1, 7, 3], dtype=np.int8)
    b = np.array([2, 2, 0, 2, 0], dtype=np.int8)
    out = np.empty_like(a)
    call("quantized_div", a, 0, b, 0, 10, 1.0, out)
    np.testing.assert_array_equal(out, [13, 7, 10, 14, 10])  # +-2.5 -> +-3, 0 divisor -> zp
    big = np.empty(3, dtype=np.int16)
    call("quantized_div", np.array([100, -100, 3], np.int16), 0, np.array([1, 1, 1], np.int16),
         0, 0, 1000.0, big)
    np.testing.assert_array_equal(big, [32767, -32768, 3000])


def test_lut_activation_indexes_by_value_plus_128():
    lut = np.arange(-128, 128, dtype=np.int8)[::-1].copy()  # negation, saturated
    x = np.array([-128, -1, 0, 127], dtype=np.int8)
    out = np.empty_like(x)
    call("quantized_activation", x, lut, out)
    np.testing.assert_array_equal(out, [127, 0, -1, -128])


def test_quantize_dequantize():
    x = np.array([-1.0, 0.0, 0.0625, 0.1875, 10.0], dtype=np.float32)
    q = np.empty(5, dtype=np.int8)
    call("quantize_per_tensor", x, 0.125, -3, -128, 127, int(ScalarType.CHAR), q)
    np.testing.assert_array_equal(q, [-11, -3, -3, -1, 77])  # ties to even: 0.5 -> 0, 1.5 -> 2
    back = np.empty(5, dtype=np.float32)
    call("dequantize_per_tensor", q, 0.125, -3, -128, 127, int(ScalarType.CHAR), back)
    np.testing.assert_array_equal(back, [-1.0, 0.0, 0.0, 0.25, 10.0])


def test_pad_pads_memory_dims():
    """pre/post pads are per memory dim: NHWC for a channels-last tensor."""
    nhwc = np.arange(1 * 2 * 2 * 3, dtype=np.int8).reshape(1, 2, 2, 3)
    out_nhwc = np.empty((1, 3, 4, 3), dtype=np.int8)
    call("pad", nhwc.transpose(0, 3, 1, 2), [0, 1, 1, 0], [0, 0, 1, 0], -7,
         out_nhwc.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(out_nhwc, np.pad(nhwc, [(0, 0), (1, 0), (1, 1), (0, 0)],
                                                   constant_values=-7))


def test_linear_kernel_sum_equals_bias_form():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(3, 10)).astype(np.int8)
    w = rng.integers(-127, 128, size=(4, 10)).astype(np.int8)
    bias = rng.integers(-1000, 1000, size=4).astype(np.int32)
    a, b = np.empty((3, 4), np.int8), np.empty((3, 4), np.int8)
    call("quantized_linear", x, w, bias, None, 17, 0, -5, [1 << 30], [-7], 127, -128, a)
    kernel_sum = (w.astype(np.int64).sum(axis=1) * 17 + bias).astype(np.int32)
    call("quantized_linear", x, w, None, kernel_sum[None], 17, 0, -5, [1 << 30], [-7], 127,
         -128, b)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("op", "args", "match"), [
    ("quantized_add", (np.zeros(4, np.int16), 0, 1, 0, np.zeros(4, np.int8), 0, 1, 0, 0, 1, 0,
                       -128, 127, np.zeros(4, np.int8)), "self must be int8"),
    ("softmax", (np.zeros((2, 3), np.int8), 0, 0, -128, 1, 0, -1, np.zeros((2, 3), np.int8)),
     "last dim only"),
    ("softmax", (np.zeros((2, 3), np.int8), -1, 0, 0, 1, 0, -1, np.zeros((2, 3), np.int8)),
     "output_zero_point must be -128"),
    ("quantized_mul", (np.zeros((1, 2, 3, 3), np.int8), 0, np.zeros((1, 3, 3, 3), np.int8), 0,
                       0, 1, 0, np.zeros((1, 2, 3, 3), np.int8)), "per-channel operand"),
    ("quantized_transpose_conv2d", (np.zeros((1, 2, 3, 3), np.int8),
                                    np.zeros((2, 2, 2, 2), np.int8), None, [1, 1], [0, 0],
                                    [0, 0], [2, 2], 0, 0, np.zeros(2, np.int32),
                                    np.zeros(2, np.int32), -128, 127, None, None,
                                    np.zeros((1, 2, 4, 4), np.int8)), "no dilation"),
    ("quantized_avg_pool2d", (np.zeros((1, 1, 2, 2), np.int8), [1, 1], [1, 1], [0, 0], True, 0,
                              1, 0, None, np.zeros((1, 1, 3, 3), np.int8)), "entirely in the"),
])
def test_bad_arguments_raise_invalid_argument(op, args, match):
    with pytest.raises(KernelError, match=match) as info:
        call(op, *args)
    assert info.value.code == ErrorCode.InvalidArgument
