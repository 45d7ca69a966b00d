"""Elementwise Cortex-M kernels: CMSIS-NN's ``arm_elementwise_add_s8``/``mul_s8``,
``arm_minimum_s8``/``maximum_s8``, the LUT activation and the float-based division, as
ExecuTorch's ``backends/cortex_m/ops`` call them."""

from __future__ import annotations

import numpy as np

from ..portable._util import invalid
from ..registry import kernel
from . import cmsis
from ._common import I64, INT8, INT16, require, require_dtype, store

ADD_LEFT_SHIFT = 20  # ExecuTorch's quantized_add: operands scaled up before requantizing


def _operands(op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray,
              dtypes=(INT8,)) -> None:
    """Same shapes, or a channel broadcast ([N, C, H, W] with a [.., C, ..] of C values)."""
    for name, x in (("self", a), ("other", b), ("out", out)):
        require_dtype(op, name, x, *dtypes)
    if a.shape == b.shape:
        require(out.shape == a.shape, f"{op}: out has shape {list(out.shape)}, the inputs "
                f"{list(a.shape)}")
        return
    broadcast = (a.ndim == b.ndim == 4 and a.shape[1] == b.shape[1]
                 and (a.size == a.shape[1] or b.size == b.shape[1]))
    require(broadcast, f"{op}: inputs of shapes {list(a.shape)} and {list(b.shape)}: CMSIS-NN "
            "takes equal shapes or a per-channel operand of a 4-D tensor")
    big = a if a.size >= b.size else b
    require(out.shape == big.shape, f"{op}: out has shape {list(out.shape)}, expected "
            f"{list(big.shape)}")


@kernel("cortex_m::quantized_add.out")
def quantized_add_out(self, self_zero_point, self_multiplier, self_shift, other,
                      other_zero_point, other_multiplier, other_shift, output_zero_point,
                      output_multiplier, output_shift, activation_min, activation_max, out):
    op = "cortex_m::quantized_add.out"
    _operands(op, self, other, out)
    a = cmsis.wrap32((self.astype(I64) - self_zero_point) << ADD_LEFT_SHIFT)
    b = cmsis.wrap32((other.astype(I64) - other_zero_point) << ADD_LEFT_SHIFT)
    total = cmsis.wrap32(cmsis.requantize(a, self_multiplier, self_shift)
                         + cmsis.requantize(b, other_multiplier, other_shift))
    result = cmsis.requantize(total, output_multiplier, output_shift) + output_zero_point
    return store(out, cmsis.clamp(result, activation_min, activation_max), op)


@kernel("cortex_m::quantized_mul.out")
def quantized_mul_out(self, self_zero_point, other, other_zero_point, output_zero_point,
                      output_multiplier, output_shift, out):
    op = "cortex_m::quantized_mul.out"
    _operands(op, self, other, out)
    product = cmsis.wrap32((self.astype(I64) - self_zero_point)
                           * (other.astype(I64) - other_zero_point))
    result = cmsis.requantize(product, output_multiplier, output_shift) + output_zero_point
    return store(out, cmsis.clamp(result, -128, 127), op)


@kernel("cortex_m::quantized_div.out")
def quantized_div_out(self, self_zero_point, other, other_zero_point, output_zero_point,
                      output_scale, out):
    """CMSIS-NN has no division: ExecuTorch divides in float32, ``std::round`` (half away
    from zero), and a zero divisor gives a zero quotient."""
    op = "cortex_m::quantized_div.out"
    for name, x in (("self", self), ("other", other)):
        require(x.dtype == out.dtype, f"{op}: {name} is {x.dtype}, out is {out.dtype}")
    require_dtype(op, "out", out, INT8, INT16)
    require(self.shape == other.shape == out.shape, f"{op}: shapes {list(self.shape)}, "
            f"{list(other.shape)} and out {list(out.shape)} must be equal")
    num = (self.astype(I64) - self_zero_point).astype(np.float32)
    den = (other.astype(I64) - other_zero_point).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = np.where(den != 0, num / den, np.float32(0))
    scaled = quotient * np.float32(output_scale)
    whole = np.trunc(scaled)  # roundf: the fraction (exact) decides, half away from zero
    rounded = whole + np.sign(scaled) * (np.abs(scaled - whole) >= np.float32(0.5))
    info = np.iinfo(out.dtype)
    value = np.clip(rounded + np.float32(output_zero_point), info.min, info.max)
    return store(out, value.astype(I64), op)


@kernel("cortex_m::quantized_activation.out")
def quantized_activation_out(input, lut, out):
    """A 256-entry table indexed by ``input + 128`` (sigmoid, tanh, silu, ... precomputed)."""
    op = "cortex_m::quantized_activation.out"
    for name, x in (("input", input), ("lut", lut), ("out", out)):
        require_dtype(op, name, x, INT8)
    require(lut.size == 256, f"{op}: lut must have 256 entries, got {lut.size}")
    require(input.size == out.size, f"{op}: input has {input.size} elements, out {out.size}")
    index = (input.astype(I64) + 128) & 0xFF
    return store(out, lut.reshape(-1)[index].astype(I64).reshape(out.shape), op)


def _min_max(op: str, fn, self: np.ndarray, other: np.ndarray, out: np.ndarray) -> np.ndarray:
    for name, x in (("self", self), ("other", other), ("out", out)):
        require_dtype(op, name, x, INT8)
    require(max(self.ndim, other.ndim) <= 4, f"{op}: CMSIS-NN takes up to 4-D inputs")
    try:
        shape = np.broadcast_shapes(self.shape, other.shape)
    except ValueError:
        raise invalid(f"{op}: shapes {list(self.shape)} and {list(other.shape)} do not "
                      "broadcast") from None
    require(tuple(out.shape) == shape, f"{op}: out has shape {list(out.shape)}, expected "
            f"{list(shape)}")
    return store(out, fn(self, other).astype(I64), op)


@kernel("cortex_m::minimum.out")
def minimum_out(self, other, out):
    return _min_max("cortex_m::minimum.out", np.minimum, self, other, out)


@kernel("cortex_m::maximum.out")
def maximum_out(self, other, out):
    return _min_max("cortex_m::maximum.out", np.maximum, self, other, out)
