"""Cortex-M softmax: CMSIS-NN's fixed-point ``arm_softmax_s8`` (``arm_nn_softmax_common_s8``)
as ExecuTorch's ``cortex_m::softmax`` calls it: rows of the tensor's last dim, output
quantized with scale 1/256 and zero point -128. ``input_zero_point`` is not used (softmax
only sees differences to the row's maximum)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from . import cmsis
from ._common import I64, INT8, read_bytes, require, require_dtype, write_bytes

ACCUM_BITS = 12
OUTPUT_ZERO_POINT = -128


def softmax_s8(rows: np.ndarray, mult: int, shift: int, diff_min: int) -> np.ndarray:
    """``arm_softmax_s8`` on an int64 array of rows (last axis)."""
    mul, div, exp = cmsis.doubling_high_mult, cmsis.divide_by_power_of_two, \
        cmsis.exp_on_negative_values
    diff = rows - rows.max(axis=-1, keepdims=True)
    mask = cmsis.wrap32(1 << shift)
    valid = diff >= diff_min
    exps = exp(mul(cmsis.wrap32(diff * mask), mult))
    total = cmsis.wrap32(np.where(valid, div(exps, ACCUM_BITS), 0).sum(axis=-1, keepdims=True))
    headroom = cmsis.count_leading_zeros(total)
    shifted = np.where(total > 0, cmsis.wrap32(np.left_shift(total, headroom)), 0)
    scale = cmsis.one_over_one_plus_x_for_x_in_0_1(cmsis.wrap32(shifted - (1 << 31)))
    bits_over_unit = ACCUM_BITS - headroom + 23
    res = div(mul(scale, exps), bits_over_unit) - 128
    return np.where(valid, cmsis.clamp(res, -128, 127), -128)


@kernel("cortex_m::softmax.out")
def softmax_out(input, dim, input_zero_point, output_zero_point, input_multiplier, input_shift,
                diff_min, out):
    op = "cortex_m::softmax.out"
    for name, x in (("input", input), ("out", out)):
        require_dtype(op, name, x, INT8)
    require(input.ndim >= 1 and dim in (-1, input.ndim - 1),
            f"{op}: CMSIS-NN softmaxes the last dim only, got dim={dim} of a {input.ndim}-D "
            "tensor")
    require(output_zero_point == OUTPUT_ZERO_POINT, f"{op}: output_zero_point must be "
            f"{OUTPUT_ZERO_POINT} (CMSIS-NN's), got {output_zero_point}")
    require(-31 <= input_shift <= 31, f"{op}: input_shift {input_shift} outside [-31, 31]")
    require(out.shape == input.shape, f"{op}: out has shape {list(out.shape)}, input "
            f"{list(input.shape)}")
    row = input.shape[-1]
    require(row > 0, f"{op}: empty rows")
    # the kernel walks the bytes in rows of the last dim's size, whatever the layout
    rows = read_bytes(input, (-1, row)).astype(I64)
    return write_bytes(out, softmax_s8(rows, input_multiplier, input_shift, diff_min), op)
