"""256-entry int8 lookup tables for the activations ``cortex_m::quantized_activation`` runs
(sigmoid, tanh, SiLU, GELU, logarithms, square roots), computed ahead of time in float64
from the input and output qparams, as ExecuTorch builds them."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ....exir.dialects._ops import ops as exir_ops
from ..ops.arith import round_half_away

aten = exir_ops.edge.aten


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _via_torch(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[float], float]:
    # torch keeps IEEE edges (log(0) = -inf) where math raises
    return lambda x: fn(torch.tensor(x, dtype=torch.float64)).item()


LUT_FUNCTIONS: dict[object, Callable[[float], float]] = {
    aten.sigmoid.default: _sigmoid,
    aten.tanh.default: math.tanh,
    aten.silu.default: lambda x: x * _sigmoid(x),
    aten.gelu.default: lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    aten.log.default: _via_torch(torch.log),
    aten.log2.default: _via_torch(torch.log2),
    aten.log10.default: _via_torch(torch.log10),
    aten.log1p.default: _via_torch(torch.log1p),
    aten.sqrt.default: _via_torch(torch.sqrt),
    aten.rsqrt.default: _via_torch(torch.rsqrt),
}


def build_activation_lut(target: object, in_scale: float, in_zp: int, out_scale: float,
                         out_zp: int) -> torch.Tensor:
    """``lut[q + 128]`` is the int8 output for int8 input ``q``; entries where the function is
    undefined (NaN) copy the nearest defined entry, poles saturate."""
    f = LUT_FUNCTIONS[target]
    defined: dict[int, int] = {}
    undefined: list[int] = []
    for q in range(-128, 128):
        y = f((q - in_zp) * in_scale)
        scaled = y / out_scale + out_zp if math.isfinite(y) else y
        if math.isnan(scaled):
            undefined.append(q + 128)
            continue
        q_out = (127 if scaled > 0 else -128) if not math.isfinite(scaled) \
            else round_half_away(scaled)
        defined[q + 128] = max(-128, min(127, q_out))
    if not defined:
        raise ValueError(f"{target} is undefined over the whole input range (scale {in_scale}, "
                         f"zero point {in_zp})")
    lut = torch.empty(256, dtype=torch.int8)
    for i, v in defined.items():
        lut[i] = v
    for i in undefined:
        lut[i] = defined[min(defined, key=lambda d: abs(d - i))]
    return lut
