"""The order in which an Ethos-U55/U65 MAC array reads one core's weights (Vela 5.1.0).

``stream_order`` returns, for each value of a decoded weight stream, the flat OHWI index of the
weight it carries, or -1 for the zero padding the traversal inserts. The loop nest (outermost
first), from Vela's ``EthosUWeightOrdering`` / ``mlw_codec`` reorder:

    OFM block (block depth of this core)
      IFM block (32 deep; 16 for part-kernel-first or 16-bit IFMs; one micro-block if depthwise)
        sub-kernel rows, sub-kernel columns (8 // dilation each)
          [part-kernel-first: IFM micro-blocks]
            OFM micro-blocks within the block
              kernel elements of the sub-kernel (rounded up to 4 for depthwise and
              part-kernel-first 8-bit, to 2 for part-kernel-first 16-bit)
                [depth-first: IFM micro-blocks within the IFM block]
                  OFM micro-block depth
                    IFM micro-block depth (1 if depthwise)

Each level but the outer three is a fixed-size grid, so one NumPy broadcast per sub-kernel
builds it; the result is cached per parameter set.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .....errors import InvalidArgumentError

SUB_KERNEL_MAX = 8  # the MAC array's largest kernel tile (Vela's SubKernelMax)


@dataclass(frozen=True)
class NpuConfig:
    """What the weight layout depends on for one ``--accelerator-config``."""

    name: str
    arch: str  # "u55" | "u65"
    macs: int
    cores: int
    ofm_ublock_depth: int
    ifm_ublock_depth: int


# Vela 5.1.0's architecture_features.accelerator_configs (macs, cores, micro-block depths).
_CONFIGS = {c.name: c for c in (
    NpuConfig("ethos-u55-32", "u55", 32, 1, 4, 8),
    NpuConfig("ethos-u55-64", "u55", 64, 1, 8, 8),
    NpuConfig("ethos-u55-128", "u55", 128, 1, 8, 8),
    NpuConfig("ethos-u55-256", "u55", 256, 1, 8, 8),
    NpuConfig("ethos-u65-256", "u65", 256, 1, 8, 8),
    NpuConfig("ethos-u65-512", "u65", 256, 2, 8, 8),
)}


def npu_config(accelerator: str) -> NpuConfig:
    """The config of ``accelerator`` (Vela's ``--accelerator-config`` string)."""
    try:
        return _CONFIGS[accelerator.lower()]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown Ethos-U accelerator {accelerator!r} for weight decoding; known: "
            f"{', '.join(_CONFIGS)} (U85 is not decoded yet)") from None


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


@lru_cache(maxsize=256)
def stream_order(cfg: NpuConfig, ofm_depth: int, ifm_depth: int, kernel_h: int, kernel_w: int,
                 ofm_block_depth: int, depthwise: bool, part_kernel_first: bool, ifm_bits: int,
                 dilation: tuple[int, int]) -> np.ndarray:
    """Flat OHWI index (into ``[ofm_depth, kernel_h, kernel_w, ifm_depth]``) of each value of
    one core's stream, -1 where the stream holds padding. Read-only (it is cached)."""
    ofm_ub, ifm_ub = cfg.ofm_ublock_depth, cfg.ifm_ublock_depth
    ifm_block = 16 if part_kernel_first or ifm_bits == 16 else 32
    decomp_y, decomp_x = SUB_KERNEL_MAX // dilation[0], SUB_KERNEL_MAX // dilation[1]
    if depthwise:
        round_to = 4
    elif part_kernel_first:
        round_to = 2 if ifm_bits == 16 else 4
    else:
        round_to = 1
    block = max(ofm_block_depth, 1)
    pieces = []
    for ofm0 in range(0, ofm_depth, block):
        ofm_clip = min(block, ofm_depth - ofm0)
        for ifm0 in range(0, 1 if depthwise else ifm_depth, ifm_block):
            if depthwise:
                ifm_clip = ifm_ub
            else:
                ifm_clip = min(ifm_block, ifm_depth - ifm0) if part_kernel_first else ifm_block
            outer, inner = (ifm_clip, 1) if part_kernel_first else (1, ifm_clip)
            for sy in range(0, kernel_h, decomp_y):
                sub_h = min(kernel_h - sy, decomp_y)
                for sx in range(0, kernel_w, decomp_x):
                    sub_w = min(kernel_w - sx, decomp_x)
                    elements = _round_up(sub_w * sub_h, round_to)
                    # axes: ifm outer, ofm ublock, element, ifm inner, ofm z, ifm z
                    a = np.arange(0, outer, ifm_ub).reshape(-1, 1, 1, 1, 1, 1)
                    b = np.arange(0, ofm_clip, ofm_ub).reshape(1, -1, 1, 1, 1, 1)
                    e = np.arange(elements).reshape(1, 1, -1, 1, 1, 1)
                    c = np.arange(0, inner, ifm_ub).reshape(1, 1, 1, -1, 1, 1)
                    d = np.arange(ofm_ub).reshape(1, 1, 1, 1, -1, 1)
                    f = np.arange(1 if depthwise else ifm_ub).reshape(1, 1, 1, 1, 1, -1)
                    ky, kx = e // sub_w, e % sub_w
                    ofm = ofm0 + b + d
                    ifm = ifm0 + a + c + f
                    valid = (ifm < ifm_depth) & (ofm < ofm_depth) & (ky < sub_h)
                    index = ((ofm * kernel_h + sy + ky) * kernel_w + sx + kx) * ifm_depth + ifm
                    pieces.append(np.where(valid, index, -1).reshape(-1))
    order = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    order.setflags(write=False)
    return order
