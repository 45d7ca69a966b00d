"""NumPy kernels with XNNPACK's semantics: pooling and resizing on ``[N, H, W, C]`` (padded
cells never win a max and are not counted by an average: XNNPACK's average excludes padding).

Pure functions of arrays and attributes; ``nodes.py`` binds them to graph nodes. The
convolutions, and the window geometry and buffers these share with them, are the convolution
package's (``kernels/conv/nhwc.py``).
"""

from __future__ import annotations

import numpy as np

from ....kernels import accel
from ....kernels.conv import compiled
from ....kernels.conv.nhwc import Scratch, Window, _buffer, _check_out, _pad_hw, _taps


def max_pool2d(x: np.ndarray, win: Window, scratch: Scratch | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
    n, h, w, c = x.shape
    oh, ow = win.out_size(h, w)
    _check_out(oh, ow, "max pooling", x.shape)
    # padded cells never win: -inf, or the integer type's minimum for quantized inputs
    if out is None:
        out = _buffer(scratch, "out", (n, oh, ow, c), x.dtype)
    if compiled.usable(x) or (x.dtype == np.int8 and accel.available()):  # one pass
        return compiled.max_pool_nhwc(x, out, (win.kh, win.kw), (win.sh, win.sw),
                                        (win.dh, win.dw), (win.pad_top, win.pad_left))
    low = np.iinfo(x.dtype).min if np.issubdtype(x.dtype, np.integer) else -np.inf
    xp = _pad_hw(x, win, low, scratch)
    first = True
    for _, _, tap in _taps(xp, win, oh, ow):
        if first:
            np.copyto(out, tap)
            first = False
        else:
            np.maximum(out, tap, out=out)
    return out


def avg_pool2d(x: np.ndarray, win: Window, scratch: Scratch | None = None) -> np.ndarray:
    """Average over the window's cells inside the input (padding is not counted)."""
    n, h, w, c = x.shape
    oh, ow = win.out_size(h, w)
    _check_out(oh, ow, "average pooling", x.shape)
    xp = _pad_hw(x, win, 0.0, scratch)
    acc = np.zeros((n, oh, ow, c), dtype=x.dtype)
    for _, _, tap in _taps(xp, win, oh, ow):
        acc += tap
    if win.pad_top or win.pad_bottom or win.pad_left or win.pad_right:
        ones = _pad_hw(np.ones((1, h, w, 1), dtype=x.dtype), win)
        count = sum(t for _, _, t in _taps(ones, win, oh, ow))
        return acc / count
    return acc / np.asarray(win.kh * win.kw, dtype=x.dtype)


def argmax_pool2d(x: np.ndarray, win: Window) -> tuple[np.ndarray, np.ndarray]:
    """Max over non-overlapping windows (stride = window) and where in the window it is.

    XNNPACK numbers a window's cells column by column: cell (i, j) is ``j * KH + i``.
    """
    n, h, w, c = x.shape
    xp = _pad_hw(x, win, -np.inf)
    oh, ow = xp.shape[1] // win.kh, xp.shape[2] // win.kw
    _check_out(oh, ow, "argmax pooling", x.shape)
    v = xp[:, : oh * win.kh, : ow * win.kw].reshape(n, oh, win.kh, ow, win.kw, c)
    v = v.transpose(0, 1, 3, 5, 4, 2).reshape(n, oh, ow, c, win.kh * win.kw)
    idx = np.argmax(v, axis=-1)
    return np.take_along_axis(v, idx[..., None], -1)[..., 0], idx


def _bilinear_axis(n: int, o: int, align_corners: bool) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """XNNPACK's source rows (top, bottom) and bottom weight for one resized axis."""
    scale = (n - 1) / (o - 1) if align_corners and o > 1 else n / o
    pos = np.arange(o, dtype=np.float32) * np.float32(scale)
    if not align_corners:  # half-pixel centres, clamped to the input
        pos = np.clip(pos + np.float32(0.5 * scale - 0.5), 0, n - 1)
    top = pos.astype(np.int64)
    bottom = np.minimum(top + 1, n - 1)
    return top, bottom, (pos - top).astype(np.float32)


def resize_bilinear2d(x: np.ndarray, oh: int, ow: int, align_corners: bool) -> np.ndarray:
    n, h, w, c = x.shape
    t, b, ay = _bilinear_axis(h, oh, align_corners)
    lft, rgt, ax = _bilinear_axis(w, ow, align_corners)
    ay = ay.astype(x.dtype)[:, None, None]
    ax = ax.astype(x.dtype)[:, None]
    rows = x[:, t] + (x[:, b] - x[:, t]) * ay
    return rows[:, :, lft] + (rows[:, :, rgt] - rows[:, :, lft]) * ax

