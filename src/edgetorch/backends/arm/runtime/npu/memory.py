"""The NPU's memory as the command stream addresses it: regions, feature maps, DMA.

Regions are base-pointer indices; at run time (ExecuTorch's ``EthosUBackend.cpp``) 0 is the
blob's ``weight_data``, 1 the scratch (which holds the delegate's inputs and outputs at the
offsets the blob's I/O table gives) and 2 the fast scratch. Feature maps are NHWC or NHCWB16
(bricks of 16 channels: ``c // 16`` steps ``stride_c``, ``c % 16`` steps the element size), split
in up to four tiles (``BASE0..3``): tile 0 holds rows ``< height0`` of columns ``< width0``,
tile 1 rows ``< height1`` of the columns from ``width0``, tiles 2 and 3 the rows below them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .....errors import InvalidProgramError

DTYPES = {(8, True): np.int8, (8, False): np.uint8, (16, True): np.int16, (16, False): np.uint16,
          (32, True): np.int32, (32, False): np.uint32, (64, True): np.int64}


class Memory:
    """Byte-addressed regions; writable regions grow on demand (a fast scratch has no size in
    the blob, its size is the platform's)."""

    def __init__(self, regions: dict[int, bytes | bytearray | np.ndarray],
                 read_only: tuple[int, ...] = (0,)) -> None:
        self.regions = {k: np.frombuffer(bytearray(v), np.uint8).copy() for k, v in regions.items()}
        self.read_only = read_only

    def region(self, index: int, end: int, write: bool = False) -> np.ndarray:
        mem = self.regions.get(index)
        if mem is None or end > mem.size:
            if index in self.read_only or (mem is None and index == 0):
                raise InvalidProgramError(
                    f"Ethos-U simulation: access up to byte {end} of region {index}, which holds "
                    f"{0 if mem is None else mem.size} bytes; the blob's weight data does not match "
                    "its command stream (re-export the model)")
            grown = np.zeros(max(end, 0), np.uint8)
            if mem is not None:
                grown[:mem.size] = mem
            self.regions[index] = mem = grown
        return mem

    def read(self, index: int, offsets: np.ndarray, dtype) -> np.ndarray:
        dt = np.dtype(dtype)
        if offsets.size == 0:
            return np.zeros(offsets.shape, dt)
        mem = self.region(index, int(offsets.max()) + dt.itemsize)
        if dt.itemsize == 1:
            return mem[offsets].view(dt)
        raw = mem[offsets[..., None] + np.arange(dt.itemsize)]
        return raw.view(dt)[..., 0]

    def write(self, index: int, offsets: np.ndarray, values: np.ndarray) -> None:
        if offsets.size == 0:
            return
        values = np.ascontiguousarray(values)
        size = values.dtype.itemsize
        mem = self.region(index, int(offsets.max()) + size, write=True)
        if size == 1:
            mem[offsets] = values.view(np.uint8)
        else:
            mem[offsets[..., None] + np.arange(size)] = values.view(np.uint8).reshape(
                *values.shape, size)

    def copy(self, src_region: int, src: int, dst_region: int, dst: int, length: int) -> None:
        data = self.region(src_region, src + length)[src:src + length].copy()
        self.region(dst_region, dst + length, write=True)[dst:dst + length] = data


@dataclass(frozen=True)
class FeatureMap:
    """A feature map as the registers describe it (sizes are counts, not ``_M1``)."""

    region: int
    bases: tuple[int, int, int, int]
    height0: int
    height1: int
    width0: int
    stride_x: int
    stride_y: int
    stride_c: int
    bits: int
    signed: bool
    nhcwb16: bool
    zero_point: int

    @property
    def dtype(self) -> np.dtype:
        key = (self.bits, self.signed)
        if key not in DTYPES:
            raise InvalidProgramError(f"Ethos-U simulation: {self.bits}-bit "
                                      f"{'signed' if self.signed else 'unsigned'} feature maps "
                                      "are not supported")
        return np.dtype(DTYPES[key])

    def offsets(self, height: int, width: int, depth: int, y0: int = 0, x0: int = 0) -> tuple[
            np.ndarray, np.ndarray]:
        """Byte offsets (and tile-independent region) of rows ``y0..y0+height`` etc."""
        y = np.arange(y0, y0 + height)[:, None]
        x = np.arange(x0, x0 + width)[None, :]
        right = x >= self.width0
        bottom = y >= np.where(right, self.height1, self.height0)
        tile = right.astype(np.int64) + 2 * bottom
        ty = np.where(bottom, np.where(right, self.height1, self.height0), 0)
        tx = np.where(right, self.width0, 0)
        base = np.asarray(self.bases, np.int64)[tile]
        yx = base + (y - ty) * self.stride_y + (x - tx) * self.stride_x
        c = np.arange(depth)
        elem = self.bits // 8
        if self.nhcwb16:
            coff = (c // 16) * self.stride_c + (c % 16) * elem
        else:
            coff = c * self.stride_c
        return yx[:, :, None] + coff[None, None, :]

    def read(self, mem: Memory, height: int, width: int, depth: int) -> np.ndarray:
        return mem.read(self.region, self.offsets(height, width, depth), self.dtype)

    def write(self, mem: Memory, values: np.ndarray) -> None:
        h, w, c = values.shape
        mem.write(self.region, self.offsets(h, w, c), values.astype(self.dtype))
