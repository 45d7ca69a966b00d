"""Winograd F(2x2, 3x3) convolution (Lavin & Gray, 2015), shared by the portable kernels
and the XNNPACK backend.

A 3x3 stride-1 convolution becomes 16 GEMMs of (tiles, C) x (C, O) over 4x4 input tiles
overlapping by 2: 2.25x fewer multiplies than im2col's single GEMM, and no 9x patch matrix.
Its float32 error is of the order of the direct sum's (against a float64 reference it is
within 2x of im2col's, often below; ResNet-18's layers: max |error| 1-2e-6 either way).
Where it is used: ``dispatch.py``.

Also: ``constant_cache``, the once-per-constant cache of derived weight arrays.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable

import numpy as np

from . import compiled, dispatch

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])

# buffer(role, shape, dtype) -> an array to overwrite (a reused one, or a new one)
Buffer = Callable[[str, tuple[int, ...], np.dtype], np.ndarray]


def transform_filter(filt_ohwc: np.ndarray) -> np.ndarray:
    """``[O, 3, 3, C]`` -> ``(16, C, O)``: ``G g G^T`` per channel pair, computed in float64
    and rounded once."""
    # _G's rows are g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2: applied over kernel rows, then over
    # kernel columns, with whole-array passes (einsum took ~10x longer at load).
    o, c = filt_ohwc.shape[0], filt_ohwc.shape[3]
    g = np.empty((3, 3, c, o))
    np.copyto(g, filt_ohwc.transpose(1, 2, 3, 0))  # float64, (kh, kw, C, O)
    t = np.empty((4, 3, c, o))
    t[0], t[3] = g[0], g[2]
    np.add(g[0], g[2], out=t[1])
    np.subtract(t[1], g[1], out=t[2])
    t[1] += g[1]
    t[1:3] *= 0.5
    u = np.empty((4, 4, c, o), filt_ohwc.dtype)  # rounded once, on the way in
    u[:, 0], u[:, 3] = t[:, 0], t[:, 2]
    s = np.add(t[:, 0], t[:, 2])
    a = s + t[:, 1]
    a *= 0.5
    u[:, 1] = a
    s -= t[:, 1]
    s *= 0.5
    u[:, 2] = s
    return u.reshape(16, c, o)


def tiles(oh: int, ow: int) -> tuple[int, int]:
    """Tile rows and columns covering an ``oh`` x ``ow`` output; the input buffer given to
    :func:`conv_nhwc` is ``(N, 2*th + 2, 2*tw + 2, C)``."""
    return -(-oh // 2), -(-ow // 2)


def conv_nhwc(xb: np.ndarray, u: np.ndarray, buffer: Buffer,
              out_size: tuple[int, int] | None = None, bias: np.ndarray | None = None,
              lo: float = -math.inf, hi: float = math.inf) -> np.ndarray:
    """Convolve the zero-bordered NHWC input ``xb`` (covering whole tiles) by transformed
    filters ``u``, plus ``bias``, clamped to [lo, hi]; returns ``(N, OH, OW, O)``
    (``out_size``, by default the whole tiles ``(2*th, 2*tw)``).

    With the ``accel`` extra the two transforms are compiled loops (``compiled``: the
    same operations in the same order, one pass each, the output transform adding the bias
    and clamp and cropping); the GEMMs are NumPy's either way."""
    n, hb, wb, c = xb.shape
    th, tw = (hb - 2) // 2, (wb - 2) // 2
    o, dt = u.shape[2], np.result_type(xb, u)
    oh, ow = out_size or (2 * th, 2 * tw)
    if compiled.usable(xb, u) and (bias is None or bias.dtype == dt):
        out = buffer("out", (n, oh, ow, o), dt)
        # blocks of tile rows: a block's transformed tiles and GEMM results stay in cache
        # from the input transform through the GEMMs to the output transform
        t = dispatch.THRESHOLDS
        rows = max(1, t.winograd_block_bytes // (tw * 16 * (c + o) * dt.itemsize))
        rows = min(th, max(rows, -(-t.winograd_min_block_tiles // tw)))
        v = buffer("wino_vt", (1, rows, tw, 16, c), dt)  # tile-major (see compiled.py)
        m = buffer("wino_mt", (1, rows, tw, 16, o), dt)
        for b in range(n):
            for ty in range(0, th, rows):
                r = min(rows, th - ty)
                vb, mb = v[:, :r], m[:, :r]
                compiled.winograd_input(xb[b : b + 1, 2 * ty : 2 * (ty + r) + 2], vb)
                np.matmul(vb.reshape(r * tw, 16, c).transpose(1, 0, 2), u,
                          out=mb.reshape(r * tw, 16, o).transpose(1, 0, 2))  # lda = 16*C
                compiled.winograd_output(mb, bias, out[b : b + 1, 2 * ty : 2 * (ty + r)],
                                           lo, hi)
        return out
    res = _conv_nhwc_numpy(xb, u, buffer)
    if (oh, ow) != (2 * th, 2 * tw):
        res = res[:, :oh, :ow]
    if bias is not None:
        res += bias
    if lo != -math.inf or hi != math.inf:
        np.clip(res, lo, hi, out=res)
    return res


def _conv_nhwc_numpy(xb: np.ndarray, u: np.ndarray, buffer: Buffer) -> np.ndarray:
    dt = np.result_type(xb, u)
    v = input_tiles_numpy(xb, buffer, dt)
    count, c, o = v.shape[2] * v.shape[3] * v.shape[4], v.shape[-1], u.shape[2]
    m = buffer("wino_m", (16, count, o), dt)
    np.matmul(v.reshape(16, count, c), u, out=m)
    return output_tiles_numpy(m.reshape(4, 4, *v.shape[2:5], o), buffer)


def input_tiles_numpy(xb: np.ndarray, buffer: Buffer, dt: np.dtype | None = None
                      ) -> np.ndarray:
    """``(4, 4, N, TH, TW, C)``: ``B^T d B`` of every 4x4 tile ``d`` of ``xb``, in whole-array
    passes of dtype ``dt`` (the NumPy path; ``compiled.winograd_input`` makes the same
    operations in the same order, tile-major)."""
    n, hb, wb, c = xb.shape
    dt = xb.dtype if dt is None else dt
    th, tw = (hb - 2) // 2, (wb - 2) // 2
    st = xb.strides
    d = np.lib.stride_tricks.as_strided(
        xb, (n, th, tw, 4, 4, c), (st[0], 2 * st[1], 2 * st[2], st[1], st[2], st[3]),
        writeable=False)
    t = buffer("wino_t", (4, n, th, tw, 4, c), dt)  # B^T d, over tile rows
    np.subtract(d[:, :, :, 0], d[:, :, :, 2], out=t[0])
    np.add(d[:, :, :, 1], d[:, :, :, 2], out=t[1])
    np.subtract(d[:, :, :, 2], d[:, :, :, 1], out=t[2])
    np.subtract(d[:, :, :, 1], d[:, :, :, 3], out=t[3])
    v = buffer("wino_v", (4, 4, n, th, tw, c), dt)  # (B^T d) B, over tile columns
    np.subtract(t[..., 0, :], t[..., 2, :], out=v[:, 0])
    np.add(t[..., 1, :], t[..., 2, :], out=v[:, 1])
    np.subtract(t[..., 2, :], t[..., 1, :], out=v[:, 2])
    np.subtract(t[..., 1, :], t[..., 3, :], out=v[:, 3])
    return v


def output_tiles_numpy(m: np.ndarray, buffer: Buffer) -> np.ndarray:
    """``(N, 2*TH, 2*TW, O)``: ``A^T M A`` of the GEMM results ``m`` ``(4, 4, N, TH, TW, O)``
    (the NumPy path; ``compiled.winograd_output`` makes the same operations in the same
    order)."""
    _, _, n, th, tw, o = m.shape
    s0 = buffer("wino_s0", (4, n, th, tw, o), m.dtype)  # A^T M, over tile rows
    s1 = buffer("wino_s1", (4, n, th, tw, o), m.dtype)
    np.add(m[0], m[1], out=s0)
    s0 += m[2]
    np.subtract(m[1], m[2], out=s1)
    s1 -= m[3]
    out = buffer("out", (n, th, 2, tw, 2, o), m.dtype)  # (A^T M) A, into the 2x2 output blocks
    for a, sa in enumerate((s0, s1)):
        y0, y1 = out[:, :, a, :, 0], out[:, :, a, :, 1]
        np.add(sa[0], sa[1], out=y0)
        y0 += sa[2]
        np.subtract(sa[1], sa[2], out=y1)
        y1 -= sa[3]
    return out.reshape(n, 2 * th, 2 * tw, o)


def _immutable(a: np.ndarray) -> bool:
    """True when nothing can change ``a``'s values: read-only all the way down to read-only
    memory (a program's constants: views of the immutable .pte bytes or a read-only map)."""
    base: object = a
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    try:  # bytes, a read-only memoryview, a read-only mmap (a program loaded from a path)
        with memoryview(base) as view:
            return view.readonly
    except TypeError:
        return False


_CACHE: dict[tuple[int, str], tuple[weakref.ref, np.ndarray]] = {}


def constant_cache(a: np.ndarray, what: str, derive: Callable[[np.ndarray], np.ndarray]
                   ) -> np.ndarray:
    """``derive(a)``, computed once per immutable array ``a`` (weights packed once, as
    ExecuTorch's backends pack at init); recomputed each call for anything mutable."""
    if not _immutable(a):
        return derive(a)
    key = (id(a), what)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is a:
        return hit[1]
    value = derive(a)
    _CACHE[key] = (weakref.ref(a, lambda _, key=key: _CACHE.pop(key, None)), value)
    return value
