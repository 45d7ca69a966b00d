"""Cortex-M pooling: CMSIS-NN's ``arm_avgpool_s8`` and ``arm_max_pool_s8`` as ExecuTorch's
``quantized_{avg,max}_pool2d`` call them (NHWC bytes, no dilation).

Both pool over the window's elements inside the input only: padding neither counts in an
average (``count_include_pad`` is applied before, by an explicit ``cortex_m::pad``) nor wins
a maximum. The average rounds half away from zero with C's truncating division; the
quantization arguments of ``quantized_avg_pool2d`` are not used (input and output share them).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..registry import kernel
from . import cmsis
from ._common import (
    I64,
    INT8,
    nhwc_shape,
    pair,
    read_bytes,
    require,
    require_dtype,
    require_rank,
    write_bytes,
)


def _pool_windows(op, input, out, kernel_size, stride, padding, fill, explicit):
    """(N, OH, OW, C, kH, kW) windows, padded with ``fill``; and the out dims."""
    for name, x in (("input", input), ("out", out)):
        require_dtype(op, name, x, INT8)
        require_rank(op, name, x, 4)
    dims_in = tuple(input.shape) if explicit else nhwc_shape(input)
    dims_out = tuple(out.shape) if explicit else nhwc_shape(out)
    require(dims_in[0] == dims_out[0] and dims_in[3] == dims_out[3],
            f"{op}: batch and channels must match between input {list(input.shape)} and out "
            f"{list(out.shape)}")
    (kh, kw), (sh, sw), (ph, pw) = (pair(op, "kernel_size", kernel_size),
                                    pair(op, "stride", stride), pair(op, "padding", padding))
    n, h, w, c = dims_in
    _, oh, ow, _ = dims_out
    rows, cols = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    padded = np.full((n, max(rows, ph + h), max(cols, pw + w), c), fill, dtype=I64)
    padded[:, ph:ph + h, pw:pw + w] = read_bytes(input, dims_in)
    view = sliding_window_view(padded[:, :rows, :cols], (kh, kw), axis=(1, 2))
    return view[:, ::sh, ::sw][:, :oh, :ow]


def _inside(size: int, out: int, kernel: int, stride: int, pad: int) -> np.ndarray:
    """Per output position, how many of the window's rows (or columns) lie in the input."""
    start = np.arange(out) * stride - pad
    return np.clip(np.minimum(start + kernel, size) - np.maximum(start, 0), 0, None)


def _avg(op, input, kernel_size, stride, padding, out, explicit):
    win = _pool_windows(op, input, out, kernel_size, stride, padding, 0, explicit)
    n, oh, ow, c, kh, kw = win.shape
    (sh, sw), (ph, pw) = pair(op, "stride", stride), pair(op, "padding", padding)
    _, h, w, _ = tuple(input.shape) if explicit else nhwc_shape(input)
    count = np.outer(_inside(h, oh, kh, sh, ph), _inside(w, ow, kw, sw, pw))[None, :, :, None]
    require(bool((count > 0).all()), f"{op}: a window lies entirely in the padding "
            "(CMSIS-NN refuses it); check kernel_size, padding and ceil_mode")
    total = win.sum(axis=(-2, -1))
    half = count // 2
    # C's '/' truncates toward zero: round half away from zero on either side
    up = (total + half) // count
    down = -((half - total) // count)
    return write_bytes(out, cmsis.clamp(np.where(total > 0, up, down), -128, 127), op)


@kernel("cortex_m::quantized_avg_pool2d.out")
def quantized_avg_pool2d_out(input, kernel_size, stride, padding, ceil_mode, zero_point,
                             multiplier, shift, scratch, out):
    return _avg("cortex_m::quantized_avg_pool2d.out", input, kernel_size, stride, padding, out,
                False)


@kernel("cortex_m::quantized_avg_pool2d_nhwc.out")
def quantized_avg_pool2d_nhwc_out(input, kernel_size, stride, padding, ceil_mode, zero_point,
                                  multiplier, shift, scratch, out):
    return _avg("cortex_m::quantized_avg_pool2d_nhwc.out", input, kernel_size, stride, padding,
                out, True)


def _max(op, input, kernel_size, stride, padding, dilation, ceil_mode, input_zero_point,
         output_zero_point, activation_min, activation_max, out, explicit):
    require(pair(op, "dilation", dilation) == (1, 1), f"{op}: dilation must be 1, got "
            f"{list(dilation)}")
    require(not ceil_mode, f"{op}: ceil_mode=True is not supported")
    require(input_zero_point == output_zero_point, f"{op}: input and output zero points "
            f"must match ({input_zero_point} vs {output_zero_point})")
    require(activation_min <= activation_max, f"{op}: activation_min {activation_min} > "
            f"activation_max {activation_max}")
    win = _pool_windows(op, input, out, kernel_size, stride, padding, -(2**31), explicit)
    best = win.max(axis=(-2, -1))
    return write_bytes(out, cmsis.clamp(best, activation_min, activation_max), op)


@kernel("cortex_m::quantized_max_pool2d.out")
def quantized_max_pool2d_out(input, kernel_size, stride, padding, dilation, ceil_mode,
                             input_zero_point, output_zero_point, activation_min,
                             activation_max, out):
    return _max("cortex_m::quantized_max_pool2d.out", input, kernel_size, stride, padding,
                dilation, ceil_mode, input_zero_point, output_zero_point, activation_min,
                activation_max, out, False)


@kernel("cortex_m::quantized_max_pool2d_nhwc.out")
def quantized_max_pool2d_nhwc_out(input, kernel_size, stride, padding, dilation, ceil_mode,
                                  input_zero_point, output_zero_point, activation_min,
                                  activation_max, out):
    return _max("cortex_m::quantized_max_pool2d_nhwc.out", input, kernel_size, stride,
                padding, dilation, ceil_mode, input_zero_point, output_zero_point,
                activation_min, activation_max, out, True)
