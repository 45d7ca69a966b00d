"""The order in which an Ethos-U85 reads one weight stream (Vela 5.1.0's Regor), and its
configs.

Differences from U55/U65 (``layout.py``): sub-kernels go column-major (X outer); IFM blocks
are walked forward and backward on alternate OFM blocks; kernel elements are visited per stride
phase, rows in a zig-zag; OFM micro-blocks are split between the weight decoders ("cores") in
groups of 4 channels (a core reads every ``cores``-th group of the whole OFM depth, not a
separate channel slice); part-kernel-first and depthwise pad each sub-kernel's elements to 5/10
with zeros, and depthwise inserts extra zero groups on wide configs. The loop nest, outermost
first:

    OFM block -> IFM block (alternating direction) -> sub-kernel X -> sub-kernel Y
      -> IFM micro-block (outer) -> OFM micro-block
        -> stride phase y, x -> kernel row, zig-zag column
          -> IFM micro-block (inner, 8 deep; 1 if depthwise)
            -> this core's 4-channel OFM groups -> 4 channels -> IFM depth of the inner step
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .....errors import InvalidArgumentError

SUB_KERNEL_MAX = 8
INTERLEAVE = 4  # OFM channels per weight-decoder group


@dataclass(frozen=True)
class U85Config:
    name: str
    macs: int
    cores: int  # weight decoders
    ublock_depths: tuple  # ((height, width), depth) per OFM micro-block (ACC_FORMAT microblock)


_U85 = {c.name: c for c in (
    U85Config("ethos-u85-128", 128, 1, (((1, 2), 8), ((1, 1), 16))),
    U85Config("ethos-u85-256", 256, 1, (((1, 2), 16), ((1, 4), 8), ((2, 2), 8))),
    U85Config("ethos-u85-512", 512, 2, (((2, 2), 16), ((1, 4), 16))),
    U85Config("ethos-u85-1024", 1024, 4, (((2, 2), 32), ((1, 4), 32), ((2, 4), 16))),
    U85Config("ethos-u85-2048", 2048, 4, (((2, 2), 64), ((1, 4), 64), ((4, 4), 16))),
)}


def u85_config(accelerator: str) -> U85Config | None:
    return _U85.get(accelerator.lower())


def ublock_depth(cfg: U85Config, ofm_ublock: tuple[int, int]) -> int:
    try:
        return dict(cfg.ublock_depths)[tuple(ofm_ublock)]
    except KeyError:
        raise InvalidArgumentError(
            f"{cfg.name} has no OFM micro-block {ofm_ublock} (height, width); it has "
            f"{sorted(dict(cfg.ublock_depths))}: pass the ACC_FORMAT microblock") from None


def ifm_block_depth(cfg: U85Config, traversal: str, ifm_bits: int, ofm_ublock_depth: int) -> int:
    """The IFM block depth the hardware uses for a convolution (no register holds it)."""
    if traversal == "part_kernel":
        return 16
    if cfg.macs in (128, 256) and ofm_ublock_depth == 16:
        return 32
    return 64


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


@lru_cache(maxsize=256)
def stream_order_u85(cfg: U85Config, stream: int, streams: int, ofm_depth: int, ifm_depth: int,
                     kernel_h: int, kernel_w: int, ofm_block_depth: int, ofm_ublock_depth: int,
                     traversal: str, ifm_bits: int, dilation: tuple[int, int],
                     stride: tuple[int, int]) -> np.ndarray:
    """Flat OHWI index (into ``[ofm_depth, kernel_h, kernel_w, ifm_depth]``, ``ifm_depth`` 1
    for depthwise) of each value of weight stream ``stream`` of ``streams``; -1 = padding."""
    depthwise = traversal == "depthwise"
    ifm16 = ifm_bits == 16
    ifm_block = ifm_block_depth(cfg, traversal, ifm_bits, ofm_ublock_depth)
    if traversal == "part_kernel":
        round_to, ifm_ub = (10 if ifm16 else 5), (8 if ifm16 else ifm_block)
    elif depthwise:
        round_to, ifm_ub = 10, 1
    else:
        round_to, ifm_ub, stride = 1, ifm_block, (1, 1)
    inner_step = 1 if depthwise else 8
    dw_pad = 0 if (not ifm16 and cfg.macs <= 256) else 2 if cfg.macs <= 512 else 6
    decomp_y, decomp_x = SUB_KERNEL_MAX // dilation[0], SUB_KERNEL_MAX // dilation[1]
    # One kernel element's values: ifm inner x this core's ofm groups x 4 x ifm depth step.
    c = np.arange(0, ifm_ub, inner_step).reshape(-1, 1, 1, 1)
    g = np.arange(stream * INTERLEAVE, ofm_ublock_depth, INTERLEAVE * streams).reshape(1, -1, 1, 1)
    i4 = np.arange(INTERLEAVE).reshape(1, 1, -1, 1)
    z = np.arange(inner_step).reshape(1, 1, 1, -1)
    grid_ofm, grid_ifm = (g + i4 + 0 * z + 0 * c).reshape(-1), (c + z + 0 * g + 0 * i4).reshape(-1)
    group = grid_ofm.size  # values per kernel element
    pieces = []
    ifm_starts = list(range(0, 1 if depthwise else ifm_depth, ifm_block))
    for n_block, ofm0 in enumerate(range(0, ofm_depth, ofm_block_depth)):
        ofm_clip = min(ofm_block_depth, ofm_depth - ofm0)
        for ifm0 in ifm_starts if n_block % 2 == 0 else ifm_starts[::-1]:
            ifm_clip = min(ifm_block, ifm_depth - ifm0)
            for sx in range(0, kernel_w, decomp_x):
                sub_w = min(kernel_w - sx, decomp_x)
                for sy in range(0, kernel_h, decomp_y):
                    sub_h = min(kernel_h - sy, decomp_y)
                    positions = _element_positions(sub_h, sub_w, stride)
                    for ifm_outer in range(0, 1 if depthwise else ifm_clip, ifm_ub):
                        for ofm_outer in range(0, ofm_clip, ofm_ublock_depth):
                            ofm = ofm0 + ofm_outer + grid_ofm
                            ifm = ifm0 + ifm_outer + grid_ifm
                            valid = (ofm < ofm_depth) & (ifm < ifm_depth)
                            remaining = _round_up(len(positions), round_to)
                            for wy, wx in positions:
                                index = ((ofm * kernel_h + sy + wy) * kernel_w + sx + wx) * ifm_depth + ifm
                                pieces.append(np.where(valid, index, -1))
                                remaining -= 1
                                if depthwise and remaining % round_to == 0:
                                    pieces.append(np.full(dw_pad * group, -1))
                            if remaining > 0:
                                pad = (remaining + (dw_pad if depthwise else 0)) * ifm_ub
                                pieces.append(np.full(pad * ofm_ublock_depth // streams, -1))
    order = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    order.setflags(write=False)
    return order


def _element_positions(sub_h: int, sub_w: int, stride: tuple[int, int]) -> list[tuple[int, int]]:
    """(y, x) within the sub-kernel in traversal order: per stride phase, rows zig-zag."""
    sy_, sx_ = stride
    out = []
    for py in range(sy_):
        rows = (sub_h + sy_ - 1 - py) // sy_
        for px in range(sx_):
            cols = (sub_w + sx_ - 1 - px) // sx_
            for ky in range(rows):
                for kx in range(cols):
                    x = kx if ky % 2 == 0 else cols - 1 - kx
                    out.append((py + ky * sy_, px + x * sx_))
    return out


def fast_block_size(cfg: U85Config, traversal: str, ifm_bits: int, ofm_ublock_depth: int) -> int:
    """Values each decoder contributes in turn to a multi-decoder fast-weight stream."""
    ifm_block = ifm_block_depth(cfg, traversal, ifm_bits, ofm_ublock_depth)
    if traversal == "part_kernel":
        ifm_ub, round_to = (8, 10) if ifm_bits == 16 else (ifm_block, 5)
    else:
        ifm_ub, round_to = ifm_block, 1
    return ofm_ublock_depth * ifm_ub * round_to // cfg.cores


def interleave_fast(orders: list[np.ndarray], block: int) -> np.ndarray:
    """The single fast-weight (FWD) stream of a multi-decoder U85: each decoder's order cut into
    ``block``-value pieces, taken round robin."""
    out, pos = [], 0
    while True:
        taken = False
        for order in orders:
            piece = order[pos:pos + block]
            if piece.size:
                out.append(piece)
                taken = True
        if not taken:
            break
        pos += block
    return np.concatenate(out) if out else np.zeros(0, np.int64)
