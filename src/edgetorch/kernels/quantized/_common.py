"""Helpers of the quantized kernels: ExecuTorch's scalar arithmetic, reproduced bit for bit.

ExecuTorch's quantized kernels (``kernels/quantized/cpu/``) mix float32 and float64 steps in
a particular order; the helpers here replay that order on NumPy arrays so that results match
its x86 build exactly, not merely within a tolerance.
"""

from __future__ import annotations

import numpy as np

from ...schema.scalar_type import ScalarType as S
from ...schema.scalar_type import to_numpy_dtype
from ..portable._util import FLOAT32, FLOAT64, invalid, is_float

F32 = np.float32
INT64_MIN = np.float32(-(2.0**63))

# The integer dtypes a quantize kernel writes and a dequantize kernel reads, with their ranges.
QUANT_RANGES = {
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint16): (0, 65535),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.int32): (-(2**31), 2**31 - 1),
}


def dtype_of(code: int | None, op: str, what: str = "dtype") -> np.dtype | None:
    """A ``ScalarType`` argument as a NumPy dtype (``None`` stays ``None``)."""
    if code is None:
        return None
    try:
        return to_numpy_dtype(S(code))
    except (KeyError, ValueError):
        raise invalid(f"{op}: unsupported ScalarType {code} for '{what}'") from None


def check_quant_range(op: str, dt: np.dtype, qmin: int, qmax: int) -> None:
    """ExecuTorch's ``check_quantize_per_tensor_args``: a known dtype and a range inside it."""
    if dt not in QUANT_RANGES:
        raise invalid(f"{op}: quantized dtype {dt} is not supported (uint8, int8, uint16, "
                      "int16 or int32); pass one of those as 'dtype'")
    lo, hi = QUANT_RANGES[dt]
    if qmin < lo or qmax > hi:
        raise invalid(f"{op}: quant range [{qmin}, {qmax}] does not fit {dt} [{lo}, {hi}]; "
                      "pass quant_min/quant_max inside the dtype's range")


def require(cond: bool, message: str) -> None:
    if not cond:
        raise invalid(message)


def require_float_input(op: str, x: np.ndarray) -> None:
    require(is_float(x.dtype), f"{op}: input must be a floating tensor, got {x.dtype}; "
            "quantize float32 (or float16/bfloat16/float64) values")


def quantize_values(x: np.ndarray, scale, zero_point, qmin: int, qmax: int,
                    dt: np.dtype) -> np.ndarray:
    """ExecuTorch's ``quantize_val``: ``clamp(zp + nearbyint(x * (1.0f / (float)scale)))``.

    The reciprocal is a float32 division and the product a float32 multiply (float64 inputs
    multiply in float64 and round to float32 once); nearbyint rounds half to even; the zero
    point is added in float32. ``scale``/``zero_point`` are scalars or arrays broadcasting
    against ``x``. A non-finite or out-of-range value converts to INT64_MIN as x86's
    ``cvttss2si`` does, so it lands on ``quant_min`` (NaN and +inf included).
    """
    inv = F32(1.0) / np.asarray(scale, dtype=FLOAT64).astype(FLOAT32)
    with np.errstate(all="ignore"):
        if x.dtype == FLOAT64:
            prod = (x * inv.astype(FLOAT64)).astype(FLOAT32)
        else:
            prod = x.astype(FLOAT32) * inv
        total = np.rint(prod) + np.asarray(zero_point).astype(np.int32).astype(FLOAT32)
        ok = np.isfinite(total) & (np.abs(total) < F32(2.0**63))
        q = np.where(ok, total, INT64_MIN).astype(np.int64)
    return np.clip(q, qmin, qmax).astype(dt)


def dequantize_values(q: np.ndarray, scale, zero_point, out_dt: np.dtype) -> np.ndarray:
    """``(q - (int32)zp) * (float)scale`` in float32, then cast to ``out_dt`` (ExecuTorch
    computes in float32 even for a float64 output)."""
    diff = q.astype(np.int64) - np.asarray(zero_point).astype(np.int64).astype(np.int32)
    with np.errstate(all="ignore"):
        value = diff.astype(FLOAT32) * np.asarray(scale, dtype=FLOAT64).astype(FLOAT32)
    return value.astype(out_dt)
