"""Giving back the resident pages of constants read from a mapped program file.

A program loaded from a path maps its file read-only; a constant is a view of that map and
costs resident memory only once read. Kernels that pack a constant at load (BatchNorm folded
into a convolution's filter, XNNPACK's convolution filters and 4-bit weight tiles) read it
once and never again: dropping its pages then keeps the resident set at what execution uses.
Clean pages of a read-only map: a later read maps them in again, with the file's bytes.
"""

from __future__ import annotations

import mmap

import numpy as np


def release_file_pages(a: np.ndarray) -> None:
    """Give back the resident pages of ``a`` when it lies in a read-only map of the program
    file (whole pages inside it only); a no-op for any other array."""
    base: object = a
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    if not isinstance(base, mmap.mmap) or a.nbytes < 2 * mmap.PAGESIZE:
        return
    start = a.ctypes.data - np.frombuffer(base, np.uint8).ctypes.data
    lo = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    hi = (start + a.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if 0 <= lo < hi <= len(base):
        try:
            base.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (AttributeError, OSError, ValueError):  # no madvise here: keep the pages
            pass
