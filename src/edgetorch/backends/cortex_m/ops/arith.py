"""CMSIS-NN's fixed-point helpers as torch functions (the ahead-of-time half).

``requantize`` is ``arm_nn_requantize``: an optional left shift, the doubling high multiply
``(v * m + 2**30) >> 31`` (no saturation) and a rounding right shift whose rounding threshold
depends on the sign (half away from zero). ``quantize_multiplier`` is the ahead-of-time split
of a real scale into that (multiplier, shift) pair, as ExecuTorch's passes compute it.
"""

from __future__ import annotations

import math

import torch

# CMSIS-NN shifts int8 operands of elementwise add left by 20 bits before scaling them.
SHIFT_INT8 = 20
# arm_softmax_s8 takes its input difference with 5 integer bits.
SOFTMAX_INPUT_INTEGER_BITS = 5
SOFTMAX_SCALE = 1.0 / 256.0
SOFTMAX_ZERO_POINT = -128


def quantize_multiplier(scale: float) -> tuple[int, int]:
    """``scale = multiplier * 2**shift / 2**31`` with a 31-bit multiplier (0, 0 for 0)."""
    if scale == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(scale)
    fixed = int(round(mantissa * (1 << 31)))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    return max(-(1 << 31), min((1 << 31) - 1, fixed)), shift


def requantize(t: torch.Tensor, multiplier: int, shift: int) -> torch.Tensor:
    """``arm_nn_requantize`` on every element (int64 arithmetic, int32 result)."""
    v = t.to(torch.int64) << max(shift, 0)
    v = (v * int(multiplier) + (1 << 30)) >> 31
    right = max(-shift, 0)
    if right:
        mask = (1 << right) - 1
        remainder = v & mask
        v = v >> right
        threshold = (mask >> 1) + (v < 0).to(torch.int64)
        v = v + (remainder > threshold).to(torch.int64)
    return v.to(torch.int32)


def requantize_channels(acc: torch.Tensor, multipliers, shifts, dim: int = 1) -> torch.Tensor:
    """Per-channel ``requantize`` of ``acc`` along ``dim``."""
    parts = [requantize(acc.select(dim, c), int(multipliers[c]), int(shifts[c]))
             for c in range(acc.shape[dim])]
    return torch.stack(parts, dim=dim)


def softmax_params(input_scale: float) -> tuple[int, int, int]:
    """(input_multiplier, input_shift, diff_min) of ``arm_softmax_s8`` for an input scale."""
    bits = SOFTMAX_INPUT_INTEGER_BITS
    real = min(input_scale * (1 << (31 - bits)), float((1 << 31) - 1))
    multiplier, shift = quantize_multiplier(real)
    diff_min_term = ((1 << bits) - 1) * math.ldexp(1.0, 31 - bits) / math.ldexp(1.0, shift)
    return int(multiplier), int(shift), -int(math.floor(diff_min_term))


def round_half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x)) if x != 0 else 0
