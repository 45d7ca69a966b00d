"""NumPy implementations of the NPU's operations on zero-point-corrected int64 feature maps.

Shapes are ``[H, W, C]`` (one batch: the NPU has none). Each function returns the accumulator
(before output scaling); ``interp`` applies the OFM scale, zero point and activation.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .arith import scale_round

_EXACT = 1 << 52  # float64 holds every integer below this: BLAS stays exact


def _windows(x: np.ndarray, kh: int, kw: int, stride: tuple[int, int],
             dilation: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """``[OH, OW, C, kh, kw]`` views of an already padded ``[H, W, C]`` map."""
    ekh, ekw = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    need_h = (out_hw[0] - 1) * stride[0] + ekh
    need_w = (out_hw[1] - 1) * stride[1] + ekw
    if x.shape[0] < need_h or x.shape[1] < need_w:
        x = np.pad(x, ((0, max(need_h - x.shape[0], 0)), (0, max(need_w - x.shape[1], 0)),
                       (0, 0)))
    win = sliding_window_view(x, (ekh, ekw), axis=(0, 1))
    win = win[:need_h - ekh + 1:stride[0], :need_w - ekw + 1:stride[1]]
    return win[..., ::dilation[0], ::dilation[1]]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer ``a @ b``: through float64 when no partial sum can reach 2**52."""
    bound = (float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0)) * a.shape[-1])
    if bound < _EXACT:
        return np.rint(a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)
    return a.astype(np.int64) @ b.astype(np.int64)


def conv2d(x: np.ndarray, w: np.ndarray, stride, dilation, out_hw) -> np.ndarray:
    """``x`` padded ``[H, W, Cin]``; ``w`` ``[Cout, kh, kw, Cin]`` -> ``[OH, OW, Cout]``."""
    cout, kh, kw, cin = w.shape
    win = _windows(x, kh, kw, stride, dilation, out_hw)  # OH, OW, Cin, kh, kw
    cols = win.transpose(0, 1, 3, 4, 2).reshape(out_hw[0] * out_hw[1], kh * kw * cin)
    out = _dot(cols, w.reshape(cout, -1).T)
    return out.reshape(out_hw[0], out_hw[1], cout)


def depthwise(x: np.ndarray, w: np.ndarray, stride, dilation, out_hw) -> np.ndarray:
    """``w`` ``[C, kh, kw]`` (one filter per channel)."""
    c, kh, kw = w.shape
    win = _windows(x, kh, kw, stride, dilation, out_hw)  # OH, OW, C, kh, kw
    return np.einsum("yxckl,ckl->yxc", win.astype(np.int64), w.astype(np.int64))


def pool(x: np.ndarray, valid: np.ndarray, mode: str, kernel, stride, out_hw):
    """Max / sum over windows of the padded map; ``valid`` marks non-padding positions.
    Returns ``(result, count of valid elements per window)``."""
    kh, kw = kernel
    win = _windows(x, kh, kw, stride, (1, 1), out_hw)
    vwin = _windows(valid[..., None].astype(np.int64), kh, kw, stride, (1, 1), out_hw)
    count = vwin.sum(axis=(-1, -2))  # OH, OW, 1
    if mode == "max":
        low = np.iinfo(np.int64).min
        res = np.where(vwin.astype(bool), win, low).max(axis=(-1, -2))
    else:
        res = np.where(vwin.astype(bool), win, 0).sum(axis=(-1, -2))
    return res, count


def average_by_count(acc: np.ndarray, count: np.ndarray, mode: int) -> np.ndarray:
    """The hardware's own averaging (no OFM scale given, i.e. padded windows): multiply by the
    reciprocal of the element count, as Vela's ``quantise_pooling_scale`` builds it."""
    out = np.empty_like(acc)
    for n in np.unique(count):
        n = int(n)
        sel = np.broadcast_to(count == n, acc.shape)
        k = (n - 1).bit_length()
        shift = 31 + k
        scale = ((1 << shift) + (1 << k)) // max(n, 1)
        out[sel] = scale_round(acc[sel], scale, shift, mode)
    return out
