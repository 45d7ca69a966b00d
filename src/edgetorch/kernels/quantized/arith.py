"""Quantized arithmetic of ExecuTorch's quantized library: ``add`` on uint8-range tensors and
the weight-only int8 matrix products ``mixed_mm`` and ``mixed_linear``.

The products accumulate one term at a time, in ExecuTorch's loop order and in the output's
dtype (not pairwise, not in BLAS), so that the sums round exactly as ExecuTorch's do.
"""

from __future__ import annotations

import numpy as np

from ..portable._util import FLOAT32, FLOAT64, finish
from ..registry import kernel
from ._common import F32, dtype_of, quantize_values, require


@kernel("quantized_decomposed::add.out")
def add_out(a, a_scale, a_zero_point, a_quant_min, a_quant_max, b, b_scale, b_zero_point,
            b_quant_min, b_quant_max, out_scale, out_zero_point, out_quant_min, out_quant_max,
            out):
    op = "quantized_decomposed::add.out"
    require(a.shape == b.shape == out.shape and a.dtype == b.dtype == out.dtype,
            f"{op}: a {a.dtype}{list(a.shape)}, b {b.dtype}{list(b.shape)} and out "
            f"{out.dtype}{list(out.shape)} must have one shape and dtype (no broadcasting)")
    require(a.dtype.kind in "iu", f"{op}: tensors must be integer, got {a.dtype}")
    for name, lo, hi in (("a", a_quant_min, a_quant_max), ("b", b_quant_min, b_quant_max),
                         ("out", out_quant_min, out_quant_max)):
        require(0 <= lo <= hi <= 255, f"{op}: {name}'s quant range [{lo}, {hi}] must lie in "
                "[0, 255] with min <= max")

    def dequantize(q, scale, zp):  # (q - zp) * scale in float64, rounded to float32
        return ((q.astype(np.int64) - int(np.int32(zp))) * float(F32(scale))).astype(FLOAT32)

    total = dequantize(a, a_scale, a_zero_point) + dequantize(b, b_scale, b_zero_point)
    q = quantize_values(total, float(F32(out_scale)), int(np.int32(out_zero_point)),
                        out_quant_min, out_quant_max, out.dtype)
    return finish(q, out)


def _check_mixed(op: str, input, weight, scales, zero_points) -> None:
    require(input.ndim == 2 and weight.ndim == 2, f"{op}: input and weight must be 2-D, got "
            f"{input.ndim}-D and {weight.ndim}-D")
    require(weight.dtype == np.dtype(np.int8), f"{op}: weight must be int8, got {weight.dtype}")
    require(input.dtype in (FLOAT32, np.dtype(np.float16)),
            f"{op}: input must be float32 or float16, got {input.dtype}")
    require(scales.dtype == input.dtype, f"{op}: weight_scales ({scales.dtype}) must have "
            f"input's dtype ({input.dtype})")
    require(zero_points is None, f"{op}: weight zero points are not supported (ExecuTorch's "
            "kernel refuses them); quantize the weight symmetrically")


@kernel("quantized_decomposed::mixed_mm.out")
def mixed_mm_out(input, weight, weight_scales, weight_zero_points, out):
    """``out[i, j] = sum_k input[i, k] * weight[k, j] * scales[k]`` (weight is [n, p])."""
    op = "quantized_decomposed::mixed_mm.out"
    _check_mixed(op, input, weight, weight_scales, weight_zero_points)
    m, n = input.shape
    require(weight.shape[0] == n and weight_scales.shape == (n,),
            f"{op}: input {list(input.shape)}, weight {list(weight.shape)} and weight_scales "
            f"{list(weight_scales.shape)} do not chain")
    require(out.dtype == input.dtype, f"{op}: out ({out.dtype}) must have input's dtype")
    t = input.dtype
    w = weight.astype(t)
    total = np.zeros((m, weight.shape[1]), t)
    with np.errstate(all="ignore"):
        for k in range(n):
            total += (input[:, k:k + 1] * w[k]) * weight_scales[k]
    return finish(total, out)


@kernel("quantized_decomposed::mixed_linear.out")
def mixed_linear_out(input, weight, weight_scales, weight_zero_points, dtype, out):
    """``input @ (weight * scales).T`` with weight [p, n] and scales [p] or [p, groups].

    Each group of the reduction accumulates on its own, then is scaled and added to the sum.
    """
    op = "quantized_decomposed::mixed_linear.out"
    _check_mixed(op, input, weight, weight_scales, weight_zero_points)
    m, n = input.shape
    p = weight.shape[0]
    require(weight.shape[1] == n and weight_scales.shape[0] == p and weight_scales.ndim in (1, 2),
            f"{op}: input {list(input.shape)}, weight {list(weight.shape)} and weight_scales "
            f"{list(weight_scales.shape)} do not chain")
    want = dtype_of(dtype, op)
    require(want is None or want == out.dtype, f"{op}: out is {out.dtype} but dtype says {want}")
    require(out.dtype in (FLOAT32, FLOAT64, np.dtype(np.float16)),
            f"{op}: out must be float16, float32 or float64, got {out.dtype}")
    g = n if weight_scales.ndim == 1 else -(-n // weight_scales.shape[1])
    scales = weight_scales.reshape(p, -1)
    t = out.dtype
    w = weight.astype(input.dtype)
    total = np.zeros((m, p), t)
    with np.errstate(all="ignore"):
        for k0 in range(0, n, g):
            part = np.zeros((m, p), t)
            for k in range(k0, min(k0 + g, n)):
                part += input[:, k:k + 1] * w[:, k]
            total += part * scales[:, k0 // g]
    return finish(total, out)
