"""Convolution in XNNPACK's layouts (NHWC), and the window geometry and buffers NHWC window
kernels share (pooling uses them too: ``backends/xnnpack/runtime/kernels.py``).

Layouts (``xnnpack.h``): convolution input ``[N, H, W, G*Cg]``, filter ``[G*Og, KH, KW, Cg]``,
output ``[N, OH, OW, G*Og]``; depthwise convolution filter ``[1, KH, KW, C*M]``, output
channel ``c*M + m`` reads input channel ``c``; deconvolution (transposed) filter
``[G*Og, KH, KW, Cg]``, output size ``(H-1)*stride + dilation*(KH-1) + 1 - pad_top -
pad_bottom + adjustment``. Which algorithm a node runs: ``dispatch.choose_nhwc``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import compiled, dispatch
from . import winograd as wg


@dataclass(frozen=True)
class Window:
    """Kernel window geometry of a 2-D convolution or pooling."""

    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    dh: int = 1
    dw: int = 1
    pad_top: int = 0
    pad_right: int = 0
    pad_bottom: int = 0
    pad_left: int = 0

    def out_size(self, h: int, w: int) -> tuple[int, int]:
        eh = self.dh * (self.kh - 1) + 1
        ew = self.dw * (self.kw - 1) + 1
        oh = (h + self.pad_top + self.pad_bottom - eh) // self.sh + 1
        ow = (w + self.pad_left + self.pad_right - ew) // self.sw + 1
        return oh, ow

    def same_padded(self, h: int, w: int) -> Window:
        """This window with TensorFlow SAME padding for an ``h`` x ``w`` input."""

        def split(n: int, k: int, s: int, d: int) -> tuple[int, int]:
            total = max((math.ceil(n / s) - 1) * s + d * (k - 1) + 1 - n, 0)
            return total // 2, total - total // 2

        top, bottom = split(h, self.kh, self.sh, self.dh)
        left, right = split(w, self.kw, self.sw, self.dw)
        return Window(self.kh, self.kw, self.sh, self.sw, self.dh, self.dw,
                      top, right, bottom, left)


class Scratch:
    """Buffers one node reuses across calls: its zero-bordered padded input, im2col matrix,
    output and temporaries, by role and shape (XNNPACK's operators own their workspace too).

    Reusing the output buffer is safe because a graph runs each node once per execution and
    the runtime copies the delegate's outputs out before the next one. A node that sees many
    shapes (dynamic inputs) drops its buffers rather than growing without bound.
    """

    MAX_BUFFERS = 16

    def __init__(self, pinned: dict[str, np.ndarray] | None = None) -> None:
        self._bufs: dict[tuple, np.ndarray] = {}
        # role -> flat uint8 memory the role's buffers are views of when they fit (the
        # output's place in the graph's arena, ``arena``)
        self._pinned = pinned or {}

    def get(self, role: str, shape: tuple[int, ...], dtype: np.dtype,
            fill: float | None = None) -> np.ndarray:
        key = (role, shape, dtype, fill)
        buf = self._bufs.get(key)
        if buf is None:
            if len(self._bufs) >= self.MAX_BUFFERS:
                self._bufs.clear()
            flat = self._pinned.get(role) if fill is None else None
            nbytes = math.prod(shape) * np.dtype(dtype).itemsize
            if flat is not None and nbytes <= flat.nbytes:
                buf = flat[:nbytes].view(dtype).reshape(shape)
            else:
                buf = np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
            self._bufs[key] = buf
        return buf

    def keep(self, key: tuple, make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()``, computed on the first call for ``key`` (derived constants)."""
        buf = self._bufs.get(key)
        if buf is None:
            buf = self._bufs[key] = make()
        return buf


class Workspace:
    """Temporaries the nodes of one graph share (patch matrices, Winograd tiles): one flat
    buffer per role, as large as the largest request, viewed at each node's shape.

    A node's temporaries are dead once it returns and the graph runs one node at a time, so
    every node can use the same memory: it stays in cache from one layer to the next, where
    per-node buffers made each layer write memory the previous ones had pushed out (ResNet-18's
    3x3 layers ran ~1.5x slower in the graph than alone)."""

    def __init__(self) -> None:
        self._flat: dict[str, np.ndarray] = {}
        self._views: dict[tuple, np.ndarray] = {}

    def get(self, role: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        key = (role, shape, dtype)
        view = self._views.get(key)
        if view is None:
            dtype = np.dtype(dtype)
            nbytes = math.prod(shape) * dtype.itemsize
            flat = self._flat.get(role)
            if flat is None or flat.nbytes < nbytes:
                flat = self._flat[role] = np.empty(max(nbytes, 1), np.uint8)
                self._views = {k: v for k, v in self._views.items() if k[0] != role}
            view = self._views[key] = flat[:nbytes].view(dtype).reshape(shape)
        return view


def _buffer(scratch: Scratch | None, role: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    return np.empty(shape, dtype) if scratch is None else scratch.get(role, shape, dtype)


def _padded(win: Window) -> bool:
    return bool(win.pad_top or win.pad_bottom or win.pad_left or win.pad_right)


def _pad_hw(x: np.ndarray, win: Window, value: float = 0.0,
            scratch: Scratch | None = None) -> np.ndarray:
    """``x`` inside a border of ``value``: a persistent buffer whose border is written once
    (only the interior is copied per call) when the node has scratch space."""
    if not _padded(win):
        return x
    n, h, w, c = x.shape
    shape = (n, h + win.pad_top + win.pad_bottom, w + win.pad_left + win.pad_right, c)
    if scratch is None:
        buf = np.full(shape, value, x.dtype)
    else:
        buf = scratch.get("pad", shape, x.dtype, value)
    buf[:, win.pad_top : win.pad_top + h, win.pad_left : win.pad_left + w] = x
    return buf


def _taps(xp: np.ndarray, win: Window, oh: int, ow: int, first_row: int = 0):
    """Yield ``(i, j, view [N, OH, OW, C])`` for each kernel tap of the padded input (output
    rows ``first_row`` to ``first_row + oh``)."""
    for i in range(win.kh):
        r0 = i * win.dh + first_row * win.sh
        rows = slice(r0, r0 + (oh - 1) * win.sh + 1, win.sh)
        for j in range(win.kw):
            c0 = j * win.dw
            yield i, j, xp[:, rows, c0 : c0 + (ow - 1) * win.sw + 1 : win.sw, :]


def _check_out(oh: int, ow: int, what: str, shape) -> None:
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{what}: output size {oh}x{ow} is empty for input {list(shape)}")


def _im2col(x: np.ndarray, win: Window, oh: int, ow: int,
            scratch: Scratch | None, work: Workspace | None = None) -> np.ndarray:
    """The ``(N*OH*OW, KH*KW*C)`` patch matrix, columns in the filter's (kh, kw, c) order
    (in ``work``'s shared memory when given)."""
    n, _, _, c = x.shape
    shape = (n * oh * ow, win.kh * win.kw * c)
    xp = _pad_hw(x, win, 0.0, scratch)
    cols = work.get("cols", shape, xp.dtype) if work else _buffer(scratch, "cols", shape,
                                                                    xp.dtype)
    if win.dw == 1:
        # Without column dilation a kernel row's KW taps are one contiguous run of KW*C
        # values of the (contiguous) padded input: one strided copy fills the matrix.
        xp = np.ascontiguousarray(xp)
        s = xp.strides
        view = np.lib.stride_tricks.as_strided(
            xp, (n, oh, ow, win.kh, win.kw * c),
            (s[0], s[1] * win.sh, s[2] * win.sw, s[1] * win.dh, s[3]), writeable=False)
        np.copyto(cols.reshape(n, oh, ow, win.kh, win.kw * c), view)
    else:
        dst = cols.reshape(n, oh, ow, win.kh * win.kw, c)
        for i, j, tap in _taps(xp, win, oh, ow):
            dst[:, :, :, i * win.kw + j] = tap
    return cols


def _epilogue(out: np.ndarray, bias: np.ndarray | None, lo: float, hi: float) -> None:
    """``out`` (M, O) += bias, clamped to [lo, hi], in place."""
    clamp = lo != -math.inf or hi != math.inf
    if bias is None and not clamp:
        return
    if compiled.usable(out) and (bias is None or bias.dtype == out.dtype):
        compiled.bias_clamp(out, bias, lo, hi)
        return
    if bias is not None:
        out += bias
    if clamp:
        np.clip(out, lo, hi, out=out)


def conv2d(x: np.ndarray, wmat: np.ndarray, bias: np.ndarray | None, win: Window,
           groups: int, scratch: Scratch | None = None, lo: float = -math.inf,
           hi: float = math.inf, work: Workspace | None = None) -> np.ndarray:
    """Convolution. ``wmat`` is the filter prepared by :func:`conv_filter_matrix`.

    GEMMs of the patch matrix (the input itself for a 1x1 stride-1 convolution) by the
    prepacked filter, written into the node's output buffer; the bias is added and the
    result clamped to [lo, hi] in place (one compiled pass with the ``accel`` extra). Large
    outputs go in blocks of output rows (``THRESHOLDS.gemm_block_bytes``), each block's patch matrix
    built, multiplied and finished while it is in cache."""
    n, h, w, c = x.shape
    oh, ow = win.out_size(h, w)
    _check_out(oh, ow, "convolution", x.shape)
    m = n * oh * ow
    if groups == 1:
        o = wmat.shape[1]
        dt = np.result_type(x, wmat)
        out = _buffer(scratch, "out", (m, o), dt)
        pointwise = win.kh == win.kw == win.sh == win.sw == 1 and not _padded(win)
        k = win.kh * win.kw * c
        # output rows per block (1x1 convolutions, without a patch matrix, gained nothing)
        block = dispatch.THRESHOLDS.gemm_block_bytes
        rows = max(1, block // max(1, ow * (o + k) * dt.itemsize))
        if pointwise or rows >= oh or win.dw != 1:  # one GEMM
            cols = x.reshape(m, c) if pointwise else _im2col(x, win, oh, ow, scratch, work)
            np.matmul(cols, wmat, out=out)
            _epilogue(out, bias, lo, hi)
            return out.reshape(n, oh, ow, o)
        out4 = out.reshape(n, oh, ow, o)
        xp = np.ascontiguousarray(_pad_hw(x, win, 0.0, scratch))
        st = xp.strides
        cols = work.get("cols", (rows * ow, k), dt) if work else \
            _buffer(scratch, "cols", (rows * ow, k), dt)
        for b in range(n):
            for r0 in range(0, oh, rows):
                r = min(rows, oh - r0)
                dst = out4[b, r0 : r0 + r].reshape(r * ow, o)
                blk = cols[: r * ow]  # the block's patch rows: one strided copy (_im2col)
                view = np.lib.stride_tricks.as_strided(
                    xp[b, r0 * win.sh :], (r, ow, win.kh, win.kw * c),
                    (st[1] * win.sh, st[2] * win.sw, st[1] * win.dh, st[3]), writeable=False)
                np.copyto(blk.reshape(r, ow, win.kh, win.kw * c), view)
                np.matmul(blk, wmat, out=dst)
                _epilogue(dst, bias, lo, hi)
        return out4
    else:
        cols = _im2col(x, win, oh, ow, scratch)
        cg = c // groups
        cols = cols.reshape(m, win.kh * win.kw, groups, cg).transpose(2, 0, 1, 3)
        cols = cols.reshape(groups, m, win.kh * win.kw * cg)
        res = np.matmul(cols, wmat)  # (G, M, Og)
        out = _buffer(scratch, "out", (m, groups * wmat.shape[2]), res.dtype)
        np.copyto(out.reshape(m, groups, -1), res.transpose(1, 0, 2))
    _epilogue(out, bias, lo, hi)
    return out.reshape(n, oh, ow, -1)


def choose(win: Window, groups: int, cin: int, cout: int, in_dims: tuple[int, ...] | None,
           constant_filter: bool) -> dispatch.Algorithm:
    """The algorithm of a convolution node (``dispatch.choose_nhwc``), from its declared
    NHWC input dims when they are known."""
    out = win.out_size(in_dims[1], in_dims[2]) if in_dims is not None and len(in_dims) == 4 \
        else None
    return dispatch.choose_nhwc(dispatch.ConvShape(
        (win.kh, win.kw), (win.sh, win.sw), (win.dh, win.dw), groups, cin, cout,
        in_dims[0] if out is not None else None, None, out), constant_filter)


def winograd_filter(filt: np.ndarray) -> np.ndarray:
    """``[O, 3, 3, C]`` -> ``(16, C, O)``, once at delegate init."""
    return wg.transform_filter(filt)


def conv2d_winograd(x: np.ndarray, u: np.ndarray, bias: np.ndarray | None, win: Window,
                    scratch: Scratch | None = None, lo: float = -math.inf,
                    hi: float = math.inf, work: Workspace | None = None) -> np.ndarray:
    n, h, w, c = x.shape
    oh, ow = win.out_size(h, w)
    _check_out(oh, ow, "convolution", x.shape)
    th, tw = wg.tiles(oh, ow)
    dt = np.result_type(x, u)
    shape = (n, 2 * th + 2, 2 * tw + 2, c)  # whole tiles: a row/column more when odd
    xb = scratch.get("wpad", shape, dt, 0.0) if scratch else np.zeros(shape, dt)
    xb[:, win.pad_top : win.pad_top + h, win.pad_left : win.pad_left + w] = x

    def buffer(role: str, shp: tuple[int, ...], dtype) -> np.ndarray:
        if work is not None and role != "out":  # temporaries: the graph's shared memory
            return work.get(role, shp, dtype)
        return _buffer(scratch, role, shp, dtype)
    return wg.conv_nhwc(xb, u, buffer, (oh, ow), bias, lo, hi)


def conv_filter_matrix(filt: np.ndarray, groups: int) -> np.ndarray:
    """``[G*Og, KH, KW, Cg]`` -> ``(KH*KW*Cg, O)`` (or ``(G, KH*KW*Cg, Og)`` when grouped)."""
    o = filt.shape[0]
    k = math.prod(filt.shape[1:])
    if groups == 1:
        return np.ascontiguousarray(filt.reshape(o, k).T)
    return np.ascontiguousarray(filt.reshape(groups, o // groups, k).transpose(0, 2, 1))


def depthwise_conv2d(x: np.ndarray, filt: np.ndarray, bias: np.ndarray | None, win: Window,
                     multiplier: int, scratch: Scratch | None = None,
                     constant_filter: bool = False, lo: float = -math.inf,
                     hi: float = math.inf) -> np.ndarray:
    """Depthwise convolution with a ``[1, KH, KW, C*M]`` filter, clamped to ``[lo, hi]``.

    With the ``accel`` extra, one compiled pass (``compiled.py``: 2-4x faster
    on MobileNetV2's layers). Otherwise one tap at a time: each tap is a multiply into a
    temporary and an add into the output buffer. The filter's taps are tiled across the
    output width first (cached when the filter is a constant): a per-channel vector
    broadcast over rows would make NumPy loop over C values at a time, the tiled row lets it
    stream whole (OW, C) rows, about 2x faster."""
    n, h, w, c = x.shape
    oh, ow = win.out_size(h, w)
    _check_out(oh, ow, "depthwise convolution", x.shape)
    if compiled.usable(x, filt) and (bias is None or bias.dtype == x.dtype):
        if multiplier != 1:  # output channel c*M + m reads input channel c
            x = np.repeat(x, multiplier, axis=-1)
        acc = _buffer(scratch, "out", (n, oh, ow, c * multiplier), x.dtype)
        return compiled.depthwise_nhwc(x, filt[0], bias, acc, (win.pad_top, win.pad_left),
                                       (win.sh, win.sw), (win.dh, win.dw), lo, hi)
    xp = _pad_hw(x, win, 0.0, scratch)
    if multiplier != 1:
        xp = np.repeat(xp, multiplier, axis=-1)
    cm = c * multiplier
    dtype = np.result_type(x, filt)

    def tile() -> np.ndarray:
        return np.ascontiguousarray(
            np.broadcast_to(filt[0, :, :, None, :], (win.kh, win.kw, ow, cm)), dtype)
    tiled = scratch.keep(("tiled", ow, dtype), tile) if scratch and constant_filter else tile()
    acc = _buffer(scratch, "out", (n, oh, ow, cm), dtype)
    # Large outputs go in blocks of rows that stay in cache across the taps' passes (a
    # 112x112x96 layer: ~4x faster than whole-tensor passes on this 2-core machine).
    per_row = n * ow * cm
    t = dispatch.THRESHOLDS
    rows = oh if oh * per_row <= t.depthwise_whole_max else max(1, t.depthwise_block // per_row)
    tmp = _buffer(scratch, "tmp", (n, min(rows, oh), ow, cm), dtype)
    tiled_bias = None if bias is None else np.broadcast_to(bias, (ow, cm)).astype(dtype)
    for r0 in range(0, oh, rows):
        r1 = min(oh, r0 + rows)
        a, t = acc[:, r0:r1], tmp[:, : r1 - r0]
        first = True
        for i, j, tap in _taps(xp, win, r1 - r0, ow, r0):
            if first:
                np.multiply(tap, tiled[i, j], out=a)
                first = False
            else:
                np.multiply(tap, tiled[i, j], out=t)
                np.add(a, t, out=a)
        if tiled_bias is not None:
            a += tiled_bias
    if lo != -math.inf or hi != math.inf:
        np.clip(acc, lo, hi, out=acc)
    return acc


def deconv2d(x: np.ndarray, filt: np.ndarray, bias: np.ndarray | None, win: Window,
             groups: int, adj_h: int, adj_w: int) -> np.ndarray:
    """Transposed convolution: multiply, then scatter every tap into the output (col2im)."""
    n, h, w, c = x.shape
    o, kh, kw, cg = filt.shape
    og = o // groups
    full_h = (h - 1) * win.sh + win.dh * (kh - 1) + 1 + adj_h
    full_w = (w - 1) * win.sw + win.dw * (kw - 1) + 1 + adj_w
    oh = full_h - win.pad_top - win.pad_bottom
    ow = full_w - win.pad_left - win.pad_right
    _check_out(oh, ow, "deconvolution", x.shape)
    xm = x.reshape(n * h * w, groups, cg).transpose(1, 0, 2)  # (G, M, Cg)
    wm = filt.reshape(groups, og, kh * kw, cg).transpose(0, 3, 2, 1).reshape(groups, cg, -1)
    cols = np.matmul(xm, wm).reshape(groups, n, h, w, kh, kw, og)
    buf = np.zeros((n, full_h, full_w, groups, og), dtype=cols.dtype)
    for i in range(kh):
        r0 = i * win.dh
        rows = slice(r0, r0 + (h - 1) * win.sh + 1, win.sh)
        for j in range(kw):
            c0 = j * win.dw
            buf[:, rows, c0 : c0 + (w - 1) * win.sw + 1 : win.sw] += (
                cols[:, :, :, :, i, j].transpose(1, 2, 3, 0, 4))
    out = buf[:, win.pad_top : win.pad_top + oh, win.pad_left : win.pad_left + ow]
    out = out.reshape(n, oh, ow, o)
    if bias is not None:
        out = out + bias
    return out


