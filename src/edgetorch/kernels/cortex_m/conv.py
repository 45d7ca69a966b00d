"""Cortex-M convolutions: CMSIS-NN's ``arm_convolve_wrapper_s8``,
``arm_depthwise_conv_wrapper_s8`` and ``arm_transpose_conv_wrapper_s8`` as ExecuTorch's
``quantized_{conv2d,depthwise_conv2d,transpose_conv2d}`` call them.

Every variant computes ``bias + sum((x + input_offset) * w)`` exactly in integers (a padded
input element is the zero point, so it adds nothing), then CMSIS-NN's per-channel
``arm_nn_requantize``, ``+ output_offset`` and the activation clamp. The sums run as float64
matrix products: every partial sum of int8 * int9 products stays far below 2^53, so they are
exact. The ``_nhwc`` variants (ExecuTorch's explicit-layout pipeline) take ``[N, H, W, C]``
tensors instead of channels-last ``[N, C, H, W]`` ones. Weights: OHWI (conv), 1HWO
(depthwise), OHWI (transposed: ``[C_out, kH, kW, C_in]``).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..registry import kernel
from . import cmsis
from ._common import (
    I64,
    INT8,
    INT32,
    nhwc_shape,
    pair,
    read_bytes,
    require,
    require_dtype,
    require_rank,
    write_bytes,
)

F64 = np.float64


def _io(op: str, input, weight, bias, mults, shifts, out, out_channels: int, explicit: bool):
    for name, x in (("input", input), ("weight", weight), ("out", out)):
        require_dtype(op, name, x, INT8)
        require_rank(op, name, x, 4)
    if bias is not None:
        require_dtype(op, "bias", bias, INT32)
        require(bias.size == out_channels, f"{op}: bias has {bias.size} values for "
                f"{out_channels} output channels")
    for name, x in (("requantize_multipliers", mults), ("requantize_shifts", shifts)):
        require_dtype(op, name, x, INT32)
        require(x.size == out_channels, f"{op}: {name} has {x.size} values for "
                f"{out_channels} output channels")
    dims_in = tuple(input.shape) if explicit else nhwc_shape(input)
    dims_out = tuple(out.shape) if explicit else nhwc_shape(out)
    require(dims_out[3] == out_channels, f"{op}: out has {dims_out[3]} channels, the weights "
            f"{out_channels}")
    require(dims_out[0] == dims_in[0], f"{op}: batch {dims_in[0]} in, {dims_out[0]} out")
    return read_bytes(input, dims_in).astype(I64), dims_out


def _windows(x: np.ndarray, kernel: tuple[int, int], stride, padding, dilation,
             out_hw: tuple[int, int]) -> np.ndarray:
    """(N, OH, OW, C, kH, kW) windows of the NHWC ``x`` (already offset: padding is 0)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = out_hw
    rows, cols = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    n, h, w, c = x.shape
    padded = np.zeros((n, max(rows, h + ph), max(cols, w + pw), c), dtype=x.dtype)
    padded[:, ph:ph + h, pw:pw + w] = x
    view = sliding_window_view(padded[:, :rows, :cols], ((kh - 1) * dh + 1, (kw - 1) * dw + 1),
                               axis=(1, 2))
    return view[:, ::sh, ::sw, :, ::dh, ::dw][:, :oh, :ow]


def _finish(acc, bias, mults, shifts, output_offset, lo, hi) -> np.ndarray:
    acc = cmsis.wrap32(acc + (bias.astype(I64) if bias is not None else 0))
    result = cmsis.requantize(acc, mults.astype(I64), shifts.astype(I64)) + output_offset
    return cmsis.clamp(result, lo, hi)


def _exact_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of integer arrays, exact (float64 BLAS; see the module docstring)."""
    return np.rint(a.astype(F64) @ b.astype(F64)).astype(I64)


def _conv(op, input, weight, bias, stride, padding, dilation, input_offset, output_offset,
          mults, shifts, lo, hi, out, explicit):
    x, dims_out = _io(op, input, weight, bias, mults, shifts, out, weight.shape[0], explicit)
    n, oh, ow, oc = dims_out
    _, kh, kw, ic_group = weight.shape
    c = x.shape[3]
    require(ic_group > 0 and c % ic_group == 0 and oc % (c // ic_group) == 0,
            f"{op}: {c} input channels, weights for {ic_group} per group and {oc} outputs "
            "do not form whole groups")
    groups = c // ic_group
    win = _windows(x + input_offset, (kh, kw), pair(op, "stride", stride),
                   pair(op, "padding", padding), pair(op, "dilation", dilation), (oh, ow))
    acc = np.empty((n, oh, ow, oc), dtype=I64)
    per_group = oc // groups
    for g in range(groups):
        cols = win[:, :, :, g * ic_group:(g + 1) * ic_group]  # (N, OH, OW, Ig, kH, kW)
        lhs = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * ic_group)
        rhs = weight[g * per_group:(g + 1) * per_group].reshape(per_group, -1).T
        acc[..., g * per_group:(g + 1) * per_group] = _exact_sum(lhs, rhs).reshape(
            n, oh, ow, per_group)
    return write_bytes(out, _finish(acc, bias, mults, shifts, output_offset, lo, hi), op)


@kernel("cortex_m::quantized_conv2d.out")
def quantized_conv2d_out(input, weight, bias, stride, padding, dilation, input_offset,
                         output_offset, requantize_multipliers, requantize_shifts,
                         activation_min, activation_max, scratch, out):
    return _conv("cortex_m::quantized_conv2d.out", input, weight, bias, stride, padding,
                 dilation, input_offset, output_offset, requantize_multipliers,
                 requantize_shifts, activation_min, activation_max, out, False)


@kernel("cortex_m::quantized_conv2d_nhwc.out")
def quantized_conv2d_nhwc_out(input, weight, bias, stride, padding, dilation, input_offset,
                              output_offset, requantize_multipliers, requantize_shifts,
                              activation_min, activation_max, scratch, out):
    return _conv("cortex_m::quantized_conv2d_nhwc.out", input, weight, bias, stride, padding,
                 dilation, input_offset, output_offset, requantize_multipliers,
                 requantize_shifts, activation_min, activation_max, out, True)


def _depthwise(op, input, weight, bias, stride, padding, dilation, depth_multiplier,
               input_offset, output_offset, mults, shifts, lo, hi, out, explicit):
    x, dims_out = _io(op, input, weight, bias, mults, shifts, out, weight.shape[3], explicit)
    n, oh, ow, oc = dims_out
    c = x.shape[3]
    require(weight.shape[0] == 1, f"{op}: depthwise weights are [1, kH, kW, C_out], got "
            f"{list(weight.shape)}")
    require(depth_multiplier >= 1 and c * depth_multiplier == oc,
            f"{op}: {c} input channels * depth_multiplier {depth_multiplier} != {oc} outputs")
    _, kh, kw, _ = weight.shape
    win = _windows(x + input_offset, (kh, kw), pair(op, "stride", stride),
                   pair(op, "padding", padding), pair(op, "dilation", dilation), (oh, ow))
    win = np.repeat(win, depth_multiplier, axis=3)  # output channel c*mult+m reads channel c
    acc = np.einsum("nyxckl,klc->nyxc", win, weight[0].astype(I64))
    return write_bytes(out, _finish(acc, bias, mults, shifts, output_offset, lo, hi), op)


@kernel("cortex_m::quantized_depthwise_conv2d.out")
def quantized_depthwise_conv2d_out(input, weight, bias, stride, padding, dilation,
                                   depth_multiplier, input_offset, output_offset,
                                   requantize_multipliers, requantize_shifts, activation_min,
                                   activation_max, scratch, out):
    return _depthwise("cortex_m::quantized_depthwise_conv2d.out", input, weight, bias, stride,
                      padding, dilation, depth_multiplier, input_offset, output_offset,
                      requantize_multipliers, requantize_shifts, activation_min,
                      activation_max, out, False)


@kernel("cortex_m::quantized_depthwise_conv2d_nhwc.out")
def quantized_depthwise_conv2d_nhwc_out(input, weight, bias, stride, padding, dilation,
                                        depth_multiplier, input_offset, output_offset,
                                        requantize_multipliers, requantize_shifts,
                                        activation_min, activation_max, scratch, out):
    return _depthwise("cortex_m::quantized_depthwise_conv2d_nhwc.out", input, weight, bias,
                      stride, padding, dilation, depth_multiplier, input_offset, output_offset,
                      requantize_multipliers, requantize_shifts, activation_min,
                      activation_max, out, True)


def _transpose_conv(op, input, weight, bias, stride, padding, output_padding, dilation,
                    input_offset, output_offset, mults, shifts, lo, hi, out, explicit):
    x, dims_out = _io(op, input, weight, bias, mults, shifts, out, weight.shape[0], explicit)
    n, oh, ow, oc = dims_out
    _, kh, kw, ic = weight.shape
    require(x.shape[3] == ic, f"{op}: {x.shape[3]} input channels, weights for {ic}")
    require(pair(op, "dilation", dilation) == (1, 1),
            f"{op}: CMSIS-NN's transposed convolution has no dilation (got {list(dilation)})")
    pair(op, "output_padding", output_padding)  # only the output size depends on it
    (sh, sw), (ph, pw) = pair(op, "stride", stride), pair(op, "padding", padding)
    _, h, w, _ = x.shape
    # every input pixel scatters kH x kW outputs into the uncropped result
    full = np.zeros((n, max((h - 1) * sh + kh, ph + oh), max((w - 1) * sw + kw, pw + ow), oc),
                    dtype=I64)
    lhs = (x + input_offset).reshape(n * h * w, ic)
    for ky in range(kh):
        for kx in range(kw):
            part = _exact_sum(lhs, weight[:, ky, kx, :].T).reshape(n, h, w, oc)
            full[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (w - 1) * sw + 1:sw] += part
    acc = full[:, ph:ph + oh, pw:pw + ow]
    return write_bytes(out, _finish(acc, bias, mults, shifts, output_offset, lo, hi), op)


@kernel("cortex_m::quantized_transpose_conv2d.out")
def quantized_transpose_conv2d_out(input, weight, bias, stride, padding, output_padding,
                                   dilation, input_offset, output_offset,
                                   requantize_multipliers, requantize_shifts, activation_min,
                                   activation_max, scratch, output_scratch, out):
    return _transpose_conv("cortex_m::quantized_transpose_conv2d.out", input, weight, bias,
                           stride, padding, output_padding, dilation, input_offset,
                           output_offset, requantize_multipliers, requantize_shifts,
                           activation_min, activation_max, out, False)


@kernel("cortex_m::quantized_transpose_conv2d_nhwc.out")
def quantized_transpose_conv2d_nhwc_out(input, weight, bias, stride, padding, output_padding,
                                        dilation, input_offset, output_offset,
                                        requantize_multipliers, requantize_shifts,
                                        activation_min, activation_max, scratch,
                                        output_scratch, out):
    return _transpose_conv("cortex_m::quantized_transpose_conv2d_nhwc.out", input, weight,
                           bias, stride, padding, output_padding, dilation, input_offset,
                           output_offset, requantize_multipliers, requantize_shifts,
                           activation_min, activation_max, out, True)
