"""Which algorithm computes a convolution, and every threshold that decides it, in one table.

Both layouts ask here: the portable ``convolution`` kernel (NCHW, ``nchw.py``) per call, and
XNNPACK's convolution and depthwise nodes (NHWC, ``nhwc.py``) once per node at delegate
init. The algorithms give the same results within float32 rounding of one another (each is
tested against torch); the choice is about speed, measured on the machines named below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


@dataclass(frozen=True)
class Thresholds:
    """Where one algorithm starts to beat another (sizes in elements, bytes, tiles)."""

    # Winograd F(2x2, 3x3) from this many input and output channels: below, its 16 GEMMs are
    # too small to beat im2col's one.
    winograd_min_channels: int = 16
    # ... and, in a delegate's graph (filters streamed from memory), this many output tiles:
    # its 16 filter matrices (16*C*O values against the direct filter's 9*C*O) are read for
    # too little work otherwise. 512 channels, 1 thread: 4 tiles (4x4) 2.4 ms against 2.3 ms
    # direct; 16 tiles (ResNet-18's 7x7 layers) 5.0 ms against 8.1 ms direct.
    winograd_min_tiles: int = 16
    # Bytes of transformed tiles and GEMM results per block of tile rows (compiled path) ...
    winograd_block_bytes: int = 1 << 19
    # ... but at least this many tiles (GEMM rows) per block: each of a block's 16 GEMMs
    # repacks its C x O filter matrix (1 thread, AVX2 Zen 3, hot filters: ResNet-18's
    # 14x14x256 layers 2.8 ms in 4 blocks of 14 tiles, 1.8 ms in one block of 49).
    winograd_min_block_tiles: int = 256
    # Depthwise (NCHW input) channels-last from input planes up to this size: per-channel
    # planes give NumPy inner loops of a few dozen elements (MobileNetV2's 28x28 down to 7x7)
    depthwise_channels_last_max_plane: int = 32 * 32
    # ... and, with a column stride and the compiled loops, up to this size (MobileNetV2's
    # stride-2 layers, 1 thread: 112x112 NCHW 1.8 ms, channels-last 3.8 ms; 56x56 1.0, 0.6).
    depthwise_channels_last_max_plane_strided: int = 64 * 64
    # Depthwise tap by tap (NumPy): output elements up to which it runs on whole planes, else
    # output elements per block (of channels NCHW, of rows NHWC) that stays in cache across
    # the taps' passes (a 112x112x96 layer: ~4x faster than whole-tensor passes).
    depthwise_whole_max: int = 1 << 19
    depthwise_block: int = 1 << 18
    # Bytes of patch rows and output per block of an NHWC im2col GEMM: a block's patch rows,
    # result and epilogue stay in L2 (ResNet-18's 7x7 stem: ~15% faster).
    gemm_block_bytes: int = 1 << 19


THRESHOLDS = Thresholds()


class Algorithm(str, Enum):
    WINOGRAD = "winograd"  # F(2x2, 3x3): 16 GEMMs of transformed tiles
    DEPTHWISE_COMPILED = "depthwise_compiled"  # one compiled loop (accel extra)
    DEPTHWISE_CHANNELS_LAST = "depthwise_channels_last"  # NumPy taps over (OW*C) rows
    DEPTHWISE_TAPS = "depthwise_taps"  # NumPy taps over planes (flattened where it can)
    GEMM = "gemm"  # im2col (the input itself for 1x1) times the filter matrix


class ConvShape(NamedTuple):
    """What a choice depends on: the filter's window, stride, dilation, groups and
    channels, the input's batch and spatial sizes and the output's (None: not known yet),
    whether the compiled loops apply to these operands (asked of depthwise convolutions
    only: the portable kernel builds one per call, a tuple costs a tenth of a dataclass),
    and whether the values are floats."""

    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    cin: int
    cout: int
    batch: int | None = None
    spatial: tuple[int, ...] | None = None
    out_spatial: tuple[int, ...] | None = None
    compiled: bool = False
    floating: bool = True

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.cin == self.groups and self.cout == self.groups

    @property
    def out_tiles(self) -> int | None:
        """Winograd's 2x2 output tiles (None: the sizes are not known)."""
        if self.out_spatial is None or self.batch is None:
            return None
        return self.batch * math.prod(-(-o // 2) for o in self.out_spatial)


def winograd_applies(c: ConvShape) -> bool:
    """3x3, stride and dilation 1, one group, enough channels, float values."""
    return (tuple(c.kernel) == (3, 3) and all(s == 1 for s in c.stride)
            and all(d == 1 for d in c.dilation) and c.groups == 1 and c.floating
            and min(c.cin, c.cout) >= THRESHOLDS.winograd_min_channels)


def choose_nchw(c: ConvShape) -> Algorithm:
    """The portable kernel's algorithm (torch's layout, its sizes known: a call)."""
    if winograd_applies(c):
        return Algorithm.WINOGRAD
    if c.depthwise and len(c.kernel) == 2:
        if c.compiled:
            return Algorithm.DEPTHWISE_COMPILED
        if c.spatial is not None and math.prod(c.spatial) <= \
                THRESHOLDS.depthwise_channels_last_max_plane:
            return Algorithm.DEPTHWISE_CHANNELS_LAST
    if c.depthwise:
        return Algorithm.DEPTHWISE_TAPS
    return Algorithm.GEMM


def choose_nhwc(c: ConvShape, constant_filter: bool) -> Algorithm:
    """An XNNPACK convolution node's algorithm (chosen at init from its declared sizes): a
    constant filter is transformed for Winograd once, where the graph has enough tiles."""
    if constant_filter and winograd_applies(c):
        tiles = c.out_tiles
        if tiles is None or tiles >= THRESHOLDS.winograd_min_tiles:
            return Algorithm.WINOGRAD
    return Algorithm.GEMM


def compiled_depthwise_channels_last(plane: int, column_stride: int) -> bool:
    """The compiled depthwise loop of an NCHW input runs channels-last (two transposing
    copies) on planes up to the table's sizes, on the NCHW planes above them."""
    limit = THRESHOLDS.depthwise_channels_last_max_plane if column_stride == 1 else \
        THRESHOLDS.depthwise_channels_last_max_plane_strided
    return plane <= limit
