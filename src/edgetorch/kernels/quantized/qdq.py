"""Quantize, dequantize and choose_qparams kernels of ExecuTorch's quantized library
(``kernels/quantized/quantized.yaml``), with its numerics (see ``_common``)."""

from __future__ import annotations

import math

import numpy as np

from ..portable._util import FLOAT32, FLOAT64, INT64, finish, wrap_dim
from ..registry import kernel
from ._common import (
    F32,
    QUANT_RANGES,
    check_quant_range,
    dequantize_values,
    dtype_of,
    quantize_values,
    require,
    require_float_input,
)

# ---- quantize ------------------------------------------------------------------------------


@kernel("quantized_decomposed::quantize_per_tensor.out")
def quantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    op = "quantized_decomposed::quantize_per_tensor.out"
    require_float_input(op, input)
    dt = dtype_of(dtype, op)
    require(out.dtype == dt, f"{op}: out is {out.dtype} but dtype says {dt}; they must match")
    check_quant_range(op, dt, quant_min, quant_max)
    return finish(quantize_values(input, scale, zero_point, quant_min, quant_max, dt), out)


def _scalar_qparams(op: str, scale: np.ndarray, zero_point: np.ndarray) -> tuple[float, int]:
    require(scale.dtype == FLOAT64, f"{op}: scale must be a float64 tensor, got {scale.dtype} "
            "(choose_qparams writes float64 scales)")
    require(zero_point.dtype == INT64, f"{op}: zero_point must be an int64 tensor, got "
            f"{zero_point.dtype}")
    require(scale.size == 1 and zero_point.size == 1,
            f"{op}: scale and zero_point must hold one element each, got {scale.size} and "
            f"{zero_point.size}")
    return float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0])


@kernel("quantized_decomposed::quantize_per_tensor.Tensor_out")
def quantize_per_tensor_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    s, zp = _scalar_qparams("quantized_decomposed::quantize_per_tensor.Tensor_out", scale,
                            zero_point)
    return quantize_per_tensor_out(input, s, zp, quant_min, quant_max, dtype, out)


def _channel_shape(ndim: int, axis: int) -> tuple[int, ...]:
    return tuple(-1 if d == axis else 1 for d in range(ndim))


@kernel("quantized_decomposed::quantize_per_channel.out")
def quantize_per_channel_out(input, scales, zero_points, axis, quant_min, quant_max, dtype, out):
    op = "quantized_decomposed::quantize_per_channel.out"
    require_float_input(op, input)
    axis = wrap_dim(axis, input.ndim)
    require(scales.dtype == FLOAT64, f"{op}: scales must be float64, got {scales.dtype}")
    require(zero_points.dtype == INT64, f"{op}: zero_points must be int64, got "
            f"{zero_points.dtype}")
    n = input.shape[axis]
    require(scales.size == n and zero_points.size == n,
            f"{op}: {scales.size} scales and {zero_points.size} zero points for {n} channels "
            f"(input {list(input.shape)}, axis {axis})")
    dt = dtype_of(dtype, op)
    require(out.dtype == dt, f"{op}: out is {out.dtype} but dtype says {dt}; they must match")
    check_quant_range(op, dt, quant_min, quant_max)
    shape = _channel_shape(input.ndim, axis)
    q = quantize_values(input, scales.reshape(shape), zero_points.reshape(shape), quant_min,
                        quant_max, dt)
    return finish(q, out)


def _as_tokens(x: np.ndarray) -> np.ndarray:
    """``[..., n]`` -> ``[tokens, n]`` (a 0-d or 1-d tensor is one token)."""
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


@kernel("quantized_decomposed::quantize_per_token.out")
def quantize_per_token_out(input, scales, zero_points, quant_min, quant_max, dtype, out):
    q = quantize_per_channel_out(_as_tokens(input), scales.reshape(-1), zero_points.reshape(-1),
                                 0, quant_min, quant_max, dtype,
                                 np.empty(_as_tokens(input).shape, out.dtype))
    return finish(q.reshape(input.shape), out)


# ---- dequantize ----------------------------------------------------------------------------


def _check_dequantize(op: str, input, quant_min, quant_max, dtype, out_dtype, out) -> None:
    require(input.dtype in QUANT_RANGES, f"{op}: input dtype {input.dtype} is not a quantized "
            "dtype (uint8, int8, uint16, int16, int32)")
    dt = dtype_of(dtype, op)
    require(input.dtype == dt, f"{op}: input is {input.dtype} but dtype says {dt}")
    want = dtype_of(out_dtype, op, "out_dtype")
    require(want is None or out.dtype == want,
            f"{op}: out is {out.dtype} but out_dtype says {want}; they must match")
    require(quant_min <= quant_max, f"{op}: quant_min {quant_min} > quant_max {quant_max}")
    require(out.dtype.kind == "f" or "bfloat16" in str(out.dtype),
            f"{op}: out must be a floating tensor, got {out.dtype}")


@kernel("quantized_decomposed::dequantize_per_tensor.out")
def dequantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out_dtype,
                              out):
    op = "quantized_decomposed::dequantize_per_tensor.out"
    _check_dequantize(op, input, quant_min, quant_max, dtype, out_dtype, out)
    return finish(dequantize_values(input, scale, zero_point, out.dtype), out)


@kernel("quantized_decomposed::dequantize_per_tensor.Tensor_out")
def dequantize_per_tensor_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype,
                                     out_dtype, out):
    s, zp = _scalar_qparams("quantized_decomposed::dequantize_per_tensor.Tensor_out", scale,
                            zero_point)
    return dequantize_per_tensor_out(input, s, zp, quant_min, quant_max, dtype, out_dtype, out)


@kernel("quantized_decomposed::dequantize_per_channel.out")
def dequantize_per_channel_out(input, scales, zero_points, axis, quant_min, quant_max, dtype,
                               out_dtype, out):
    """Per-channel scales may be float32 or float64 (rounded to float32 first).

    ExecuTorch reads int32 zero points as int64 memory (a bug); here they are read as int32.
    """
    op = "quantized_decomposed::dequantize_per_channel.out"
    axis = wrap_dim(axis, input.ndim)
    n = input.shape[axis]
    require(scales.dtype in (FLOAT32, FLOAT64),
            f"{op}: scales must be float32 or float64, got {scales.dtype}")
    require(scales.size == n, f"{op}: {scales.size} scales for {n} channels "
            f"(input {list(input.shape)}, axis {axis})")
    if zero_points is not None:
        require(zero_points.dtype in (np.dtype(np.int32), INT64),
                f"{op}: zero_points must be int32 or int64, got {zero_points.dtype}")
        require(zero_points.size == n, f"{op}: {zero_points.size} zero points for {n} channels")
    _check_dequantize(op, input, quant_min, quant_max, dtype, out_dtype, out)
    shape = _channel_shape(input.ndim, axis)
    s = scales.astype(FLOAT32).reshape(shape)
    zp = np.zeros(1, INT64) if zero_points is None else zero_points.reshape(shape)
    if input.ndim == 1 and out.dtype == FLOAT64:
        # ExecuTorch's 1-D path casts (q - zp) to the output type before the multiply.
        diff = input.astype(np.int64) - zp.astype(np.int32)
        return finish(diff.astype(FLOAT64) * s.astype(FLOAT64), out)
    return finish(dequantize_values(input, s, zp, out.dtype), out)


@kernel("quantized_decomposed::dequantize_per_token.out")
def dequantize_per_token_out(input, scales, zero_points, quant_min, quant_max, dtype,
                             output_dtype, out):
    op = "quantized_decomposed::dequantize_per_token.out"
    tokens = _as_tokens(input)
    require(scales.size == tokens.shape[0] and zero_points.size == tokens.shape[0],
            f"{op}: {scales.size} scales and {zero_points.size} zero points for "
            f"{tokens.shape[0]} tokens")
    r = dequantize_per_channel_out(tokens, scales.reshape(-1), zero_points.reshape(-1), 0,
                                   quant_min, quant_max, dtype, output_dtype,
                                   np.empty(tokens.shape, out.dtype))
    return finish(r.reshape(input.shape), out)


# ---- choose_qparams ------------------------------------------------------------------------

_SMALL_SCALE = F32(6.1e-5)  # ExecuTorch's SMALL_SCALE_THRESHOLD; eps is ignored


def scale_and_zero_point(lo: np.float32, hi: np.float32, qmin: int, qmax: int
                         ) -> tuple[float, int]:
    """ExecuTorch's ``calculate_scale_and_zero_point`` (float64 scale, nudged zero point)."""
    lo, hi = min(F32(lo), F32(0.0)), max(F32(hi), F32(0.0))
    scale = (float(hi) - float(lo)) / (qmax - qmin)
    with np.errstate(all="ignore"):
        if F32(scale) == 0 or math.isinf(F32(1.0) / F32(scale)):
            scale = 0.1
    if scale < float(_SMALL_SCALE):
        org = F32(scale)
        scale = float(_SMALL_SCALE)
        span = F32(qmax - qmin)
        if lo == 0:
            hi = _SMALL_SCALE * span
        elif hi == 0:
            lo = -_SMALL_SCALE * span
        else:
            amp = _SMALL_SCALE / org
            lo, hi = F32(lo * amp), F32(hi * amp)
    from_min = qmin - float(lo) / scale
    from_max = qmax - float(hi) / scale
    err_min = abs(qmin) - abs(float(lo) / scale)
    err_max = abs(qmax) - abs(float(hi) / scale)
    initial = from_min if err_min < err_max else from_max
    if initial < qmin:
        return scale, qmin
    if initial > qmax:
        return scale, qmax
    return scale, int(np.rint(F32(initial)))


def _check_choose(op: str, input, qmin, qmax, scale_out, zero_point_out) -> None:
    require(qmin < qmax, f"{op}: quant_min {qmin} must be < quant_max {qmax}")
    require(input.dtype == FLOAT32, f"{op}: input must be float32, got {input.dtype}")
    require(input.size > 0, f"{op}: input is empty; there is no range to choose from")
    require(scale_out.dtype == FLOAT64, f"{op}: scale_out must be float64, got "
            f"{scale_out.dtype}")
    require(zero_point_out.dtype == INT64, f"{op}: zero_point_out must be int64, got "
            f"{zero_point_out.dtype}")


@kernel("quantized_decomposed::choose_qparams.Tensor_out")
def choose_qparams_tensor_out(input, quant_min, quant_max, eps, dtype, scale_out,
                              zero_point_out):
    """``eps`` is ignored, as in ExecuTorch: scales below 6.1e-5 are raised to it instead."""
    op = "quantized_decomposed::choose_qparams.Tensor_out"
    _check_choose(op, input, quant_min, quant_max, scale_out, zero_point_out)
    require(scale_out.size == 1 and zero_point_out.size == 1,
            f"{op}: scale_out and zero_point_out must hold one element each")
    s, zp = scale_and_zero_point(input.min(), input.max(), quant_min, quant_max)
    scale_out.reshape(-1)[0] = s
    zero_point_out.reshape(-1)[0] = zp
    return scale_out, zero_point_out


@kernel("quantized_decomposed::choose_qparams_per_token_asymmetric.out")
def choose_qparams_per_token_asymmetric_out(input, dtype, scale_out, zero_point_out):
    """One (scale, zero point) per row of the last dimension, over int8's [-128, 127]."""
    op = "quantized_decomposed::choose_qparams_per_token_asymmetric.out"
    _check_choose(op, input, -128, 127, scale_out, zero_point_out)
    tokens = _as_tokens(input)
    params = [scale_and_zero_point(lo, hi, -128, 127)
              for lo, hi in zip(tokens.min(axis=1), tokens.max(axis=1))]
    shape = (*input.shape[:-1], 1)
    scales = np.array([p[0] for p in params], FLOAT64).reshape(shape)
    zps = np.array([p[1] for p in params], INT64).reshape(shape)
    return finish(scales, scale_out), finish(zps, zero_point_out)
