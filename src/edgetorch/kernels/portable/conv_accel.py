"""Convolution loops compiled with numba (the optional ``accel`` extra, ``kernels.accel``).

NumPy computes a depthwise convolution as one multiply and one add pass over the output per
filter tap (18 passes for 3x3); these loops read each input row once per tap from cache and
write each output element once, with the bias added first and the output clamp applied as
the element is finished. Padding is handled by skipping taps that fall outside the input (a
zero-padded input contributes nothing there), so no padded copy is made.

Float32 sums are taken in a different order than the NumPy taps (bias first, taps in
row-major order), within float32 rounding of eager PyTorch; on exact integers held in
floats (the int8 path's centered accumulators) every order gives the same result.

Callers check :func:`usable` (numba installed and on, matching float dtypes) and otherwise
take their NumPy path.
"""

from __future__ import annotations

import numpy as np

from .. import accel

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def usable(*arrays: np.ndarray) -> bool:
    """The compiled loops apply: numba is available and every array has one float dtype."""
    dt = arrays[0].dtype
    return dt in _FLOATS and all(a.dtype == dt for a in arrays) and accel.available()


@accel.jit
def _nhwc(x, w, bias, out, pt, pl, sh, sw, dh, dw, lo, hi):  # pragma: no cover - compiled
    """``out[n, oy, ox, c] = clamp(bias[c] + sum_ij x[n, iy, ix, c] * w[i, j, c])``, one
    output row at a time: per tap, the range of output columns whose input is inside is
    computed once, so the inner loops run without bounds tests (with 32 channels a test per
    pixel and tap made this 1.5x slower)."""
    nb, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    oh, ow = out.shape[1], out.shape[2]
    for n in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    out[n, oy, ox, ch] = bias[ch]
            for i in range(kh):
                iy = oy * sh - pt + i * dh
                if iy < 0 or iy >= h:
                    continue
                for j in range(kw):
                    off = j * dw - pl
                    first = 0 if off >= 0 else (-off + sw - 1) // sw
                    last = min(ow, (wd - 1 - off) // sw + 1) if wd - 1 - off >= 0 else 0
                    for ox in range(first, last):
                        ix = ox * sw + off
                        for ch in range(c):
                            out[n, oy, ox, ch] += x[n, iy, ix, ch] * w[i, j, ch]
            for ox in range(ow):
                for ch in range(c):  # NaN passes through, as np.clip lets it
                    v = out[n, oy, ox, ch]
                    if v < lo:
                        out[n, oy, ox, ch] = lo
                    elif v > hi:
                        out[n, oy, ox, ch] = hi


def depthwise_nhwc(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                   pad: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                   lo: float = -np.inf, hi: float = np.inf) -> np.ndarray:
    """``x`` [N, H, W, C], ``w`` [KH, KW, C] -> ``out`` [N, OH, OW, C] (zero padding
    ``pad`` = (top, left); bottom/right follow from ``out``'s size), clamped to [lo, hi]."""
    b = np.zeros(x.shape[3], x.dtype) if bias is None else bias
    _nhwc(np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(b, x.dtype),
          out, pad[0], pad[1], stride[0], stride[1], dilation[0], dilation[1],
          x.dtype.type(lo), x.dtype.type(hi))
    return out
