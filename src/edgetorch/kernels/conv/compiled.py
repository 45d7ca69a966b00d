"""Convolution and pooling loops compiled with numba (the optional ``accel`` extra, ``kernels.accel``).

Where NumPy needs many passes over memory, one loop reads each input once and writes each
result once:

* depthwise convolution (NHWC for XNNPACK, NCHW for the portable kernel; int8 -> int8 for
  XNNPACK's static int8): NumPy makes one multiply and one add pass per filter tap (18 for
  3x3). The loops add the bias first and clamp each element as it is finished; taps that fall
  outside the input are skipped (zero padding, or the zero point for int8, adds nothing), so
  no padded copy is made. Float32 sums are taken in another order than NumPy's taps, within
  float32 rounding of eager PyTorch; on exact integers (int8) every order is exact;
* Winograd F(2x2, 3x3) input and output transforms (``winograd.py``): the NumPy path's
  operations in its order, bit-identical;
* GEMM epilogues: bias + clamp (float), bias + requantization (int8, bit-identical).

Callers check :func:`usable` (or ``accel.available()``) and otherwise take their NumPy path.
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
    """``out[n, oy, ox, c] = clamp(bias[c] + sum_ij x[n, iy, ix, c] * w[i, j, c])``, a
    pixel at a time: the bias, then each tap inside the input in (row, column) order, then
    the clamp; taps outside (zero padding) add nothing.

    A 3x3 window with all nine taps inside (every pixel but the border) is one pass over
    the channels with the sum in a register, the same operations in the same order (same
    bits). A tap-at-a-time loop adding into the output row in memory ran 2-2.7x slower on
    MobileNetV2's layers."""
    nb, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    oh, ow = out.shape[1], out.shape[2]
    # output columns whose taps are all inside: ox*sw - pl >= 0, ox*sw - pl + (kw-1)*dw < wd
    cfirst = min(ow, (pl + sw - 1) // sw)
    span = wd - 1 + pl - (kw - 1) * dw
    clast = max(cfirst, min(ow, span // sw + 1)) if span >= 0 else cfirst
    three = kh == 3 and kw == 3
    k1, k2 = (1, 2) if three else (0, 0)  # the nine filter rows (unused unless 3x3)
    w00, w01, w02 = w[0, 0], w[0, k1], w[0, k2]
    w10, w11, w12 = w[k1, 0], w[k1, k1], w[k1, k2]
    w20, w21, w22 = w[k2, 0], w[k2, k1], w[k2, k2]
    for n in range(nb):
        for oy in range(oh):
            orow = out[n, oy]
            iy = oy * sh - pt
            inner = three and iy >= 0 and iy + 2 * dh < h
            first, last = (cfirst, clast) if inner else (ow, ow)
            for ox in range(ow):
                if first <= ox < last:
                    continue
                a = orow[ox]
                for ch in range(c):
                    a[ch] = bias[ch]
                for i in range(kh):
                    y = iy + i * dh
                    if y < 0 or y >= h:
                        continue
                    for j in range(kw):
                        ix = ox * sw - pl + j * dw
                        if ix < 0 or ix >= wd:
                            continue
                        xp = x[n, y, ix]
                        wr = w[i, j]
                        for ch in range(c):
                            a[ch] += xp[ch] * wr[ch]
                for ch in range(c):  # NaN passes through, as np.clip lets it
                    v = a[ch]
                    if v < lo:
                        a[ch] = lo
                    elif v > hi:
                        a[ch] = hi
            if first >= last:
                continue
            r0, r1, r2 = x[n, iy], x[n, iy + dh], x[n, iy + 2 * dh]
            for ox in range(first, last):
                ix = ox * sw - pl
                a0, a1, a2 = r0[ix], r0[ix + dw], r0[ix + 2 * dw]
                b0, b1, b2 = r1[ix], r1[ix + dw], r1[ix + 2 * dw]
                c0, c1, c2 = r2[ix], r2[ix + dw], r2[ix + 2 * dw]
                o = orow[ox]
                for ch in range(c):
                    s = bias[ch]
                    s += a0[ch] * w00[ch]
                    s += a1[ch] * w01[ch]
                    s += a2[ch] * w02[ch]
                    s += b0[ch] * w10[ch]
                    s += b1[ch] * w11[ch]
                    s += b2[ch] * w12[ch]
                    s += c0[ch] * w20[ch]
                    s += c1[ch] * w21[ch]
                    s += c2[ch] * w22[ch]
                    if s < lo:
                        s = lo
                    elif s > hi:
                        s = hi
                    o[ch] = s


@accel.jit
def _nchw(x, w, bias, out, pt, pl, sh, sw, dh, dw, lo, hi):  # pragma: no cover - compiled
    """``out[n, c, oy, ox] = clamp(bias[c] + sum_ij x[n, c, iy, ix] * w[c, i, j])``, a plane
    at a time, each tap a run of an output row. Rows are indexed through slices starting
    at the first valid column: a possibly negative index makes numba test for wraparound
    on every element, which kept the loop scalar (4x slower). With a column stride each
    input plane is first split into its ``sw`` column phases (``phases[y, r, q] =
    x[.., y, q*sw + r]``) so that every tap reads a contiguous run too: reading every
    ``sw``-th element kept the loop scalar (MobileNetV2's 112x112 stride-2 layer 4.9 ms,
    1.8 ms split)."""
    nb, c, h, wd = x.shape
    kh, kw = w.shape[1], w.shape[2]
    oh, ow = out.shape[2], out.shape[3]
    phases = np.empty((h if sw > 1 else 0, sw, (wd + sw - 1) // sw), x.dtype)
    for n in range(nb):
        for ch in range(c):
            if sw > 1:
                for y in range(h):
                    xr = x[n, ch, y]
                    for r in range(sw):
                        pr = phases[y, r]
                        for q in range((wd - r + sw - 1) // sw):
                            pr[q] = xr[q * sw + r]
            b = bias[ch]
            for oy in range(oh):
                orow = out[n, ch, oy]
                for ox in range(ow):
                    orow[ox] = b
                for i in range(kh):
                    iy = oy * sh - pt + i * dh
                    if iy < 0 or iy >= h:
                        continue
                    xrow = x[n, ch, iy]
                    for j in range(kw):
                        off = j * dw - pl
                        first = 0 if off >= 0 else (-off + sw - 1) // sw
                        last = min(ow, (wd - 1 - off) // sw + 1) if wd - 1 - off >= 0 else 0
                        if last <= first:
                            continue
                        wt = w[ch, i, j]
                        start = first * sw + off
                        if sw == 1:
                            src = xrow[start:]
                        else:
                            src = phases[iy, start % sw, start // sw :]
                        dst = orow[first:last]
                        for k in range(last - first):
                            dst[k] += src[k] * wt
                for ox in range(ow):
                    orow[ox] = min(max(orow[ox], lo), hi)


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



def depthwise_nchw(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                   pad: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                   lo: float = -np.inf, hi: float = np.inf) -> np.ndarray:
    """``x`` [N, C, H, W], ``w`` [C, KH, KW] -> ``out`` [N, C, OH, OW] (as
    :func:`depthwise_nhwc`, channels first: fast for large planes at stride 1)."""
    b = np.zeros(x.shape[1], x.dtype) if bias is None else bias
    _nchw(np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(b, x.dtype),
          out, pad[0], pad[1], stride[0], stride[1], dilation[0], dilation[1],
          x.dtype.type(lo), x.dtype.type(hi))
    return out


@accel.jit
def _nhwc_q8(x, zp, w, bias, scale, out_zp, lo, hi, out, pt, pl, sh, sw, dh,
             dw):  # pragma: no cover - compiled
    """int8 depthwise: ``(x - zp) * w`` summed in float32 on exact integers (the caller
    checked the bound that keeps every partial sum below 2**24), plus ``bias``, then
    requantized as ``kernels_quant.requantize_f32`` does it: times ``scale[c]``, clamped
    to [lo, hi] (centered), rounded half to even, plus ``out_zp``, all in float32."""
    nb, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    oh, ow = out.shape[1], out.shape[2]
    acc = np.empty((ow, c), np.float32)
    for n in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    acc[ox, ch] = bias[ch]
            for i in range(kh):
                iy = oy * sh - pt + i * dh
                if iy < 0 or iy >= h:
                    continue
                xrow = x[n, iy]
                for j in range(kw):
                    off = j * dw - pl
                    first = 0 if off >= 0 else (-off + sw - 1) // sw
                    last = min(ow, (wd - 1 - off) // sw + 1) if wd - 1 - off >= 0 else 0
                    wr = w[i, j]
                    for ox in range(first, last):
                        xp = xrow[ox * sw + off]
                        a = acc[ox]
                        for ch in range(c):
                            a[ch] += (np.float32(xp[ch]) - zp) * wr[ch]
            orow = out[n, oy]
            for ox in range(ow):
                for ch in range(c):
                    v = acc[ox, ch] * scale[ch]
                    v = min(max(v, lo), hi)
                    orow[ox, ch] = np.int8(np.rint(v) + out_zp)


def depthwise_q8_nhwc(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray | None,
                      scale: np.ndarray, out_zp: int, lo: int, hi: int, out: np.ndarray,
                      pad: tuple[int, int], stride: tuple[int, int],
                      dilation: tuple[int, int]) -> np.ndarray:
    """int8 ``x`` [N, H, W, C] (zero point ``x_zp``; padding is the zero point, i.e. adds
    nothing) by ``w`` [KH, KW, C] (float32 exact integers) -> int8 ``out`` [N, OH, OW, C]
    with the output bounds ``lo``..``hi`` (int8 values); bit-identical to the NumPy path
    (centering, float32 taps, ``requantize_f32``)."""
    c = x.shape[3]
    f32 = np.float32
    b, sc = per_channel(bias, c, 0), per_channel(scale, c, 1)
    _nhwc_q8(np.ascontiguousarray(x), f32(x_zp), np.ascontiguousarray(w, f32), b, sc,
             f32(out_zp), f32(lo - out_zp), f32(hi - out_zp), out, pad[0], pad[1], stride[0],
             stride[1], dilation[0], dilation[1])
    return out


def per_channel(a: np.ndarray | None, c: int, missing: float) -> np.ndarray:
    """``a`` (a bias or scales: None, a scalar or ``c`` values) as ``c`` contiguous float32
    values; ``a`` itself when it is that already (prepared at load: no per-call copy)."""
    if a is not None and type(a) is np.ndarray and a.dtype == np.float32 and a.shape == (c,) \
            and a.flags.c_contiguous:
        return a
    if a is None:
        return np.full(c, missing, np.float32)
    return np.ascontiguousarray(np.broadcast_to(np.asarray(a, np.float32), (c,)))


@accel.jit
def _requantize(acc, bias, scale, out_zp, lo, hi, out):  # pragma: no cover - compiled
    m, o = acc.shape
    for i in range(m):
        for k in range(o):
            v = (acc[i, k] + bias[k]) * scale[k]
            out[i, k] = np.int8(np.rint(min(max(v, lo), hi)) + out_zp)


def bias_requantize(acc: np.ndarray, bias: np.ndarray | None, scale: np.ndarray,
                    out_zp: int, lo: int, hi: int, out: np.ndarray) -> np.ndarray:
    """float32 exact-integer accumulators ``acc`` (..., O) + ``bias`` -> int8 ``out`` in one
    pass, the operations of ``acc += bias`` then ``kernels_quant.requantize_f32`` (five
    NumPy passes) in their order: bit-identical."""
    o = acc.shape[-1]
    f32 = np.float32
    b, sc = per_channel(bias, o, 0), per_channel(scale, o, 1)
    _requantize(acc.reshape(-1, o), b, sc, f32(out_zp), f32(lo - out_zp), f32(hi - out_zp),
                out.reshape(-1, o))
    return out

# ---- Winograd F(2x2, 3x3) transforms (``winograd.py``) --------------------------------------
# NumPy makes the input transform B^T d B in 8 whole-array passes through a temporary as
# large as its result, and the output transform A^T M A in 10 more; these loops read each
# tile once and write each result once, in the same order of operations (bit-identical to
# the NumPy path), the output transform also cropping to the output size and adding the
# bias and clamp.


@accel.jit
def _wino_in(xb, v):  # pragma: no cover - compiled
    """``v[n, ty, tx, 4*a + b, c] = (B^T d B)[a, b]`` of the 4x4 tile d at (2*ty, 2*tx):
    tile-major, so the 16 results of a tile are one contiguous run (16 separate streams
    ``count * C`` apart hit the same cache sets when that is a multiple of 4 KiB: 5x slower
    on ResNet-18's 56x56x64 layers); the GEMMs read them with a row stride of 16*C."""
    nb, hb, wb, c = xb.shape
    th, tw = (hb - 2) // 2, (wb - 2) // 2
    for n in range(nb):
        for ty in range(th):
            r0, r1, r2, r3 = xb[n, 2 * ty], xb[n, 2 * ty + 1], xb[n, 2 * ty + 2], xb[n, 2 * ty + 3]
            for tx in range(tw):
                j = 2 * tx
                for ch in range(c):
                    # rows first (B^T d): t_a of column k, k = 0..3
                    t00 = r0[j, ch] - r2[j, ch]
                    t10 = r1[j, ch] + r2[j, ch]
                    t20 = r2[j, ch] - r1[j, ch]
                    t30 = r1[j, ch] - r3[j, ch]
                    t01 = r0[j + 1, ch] - r2[j + 1, ch]
                    t11 = r1[j + 1, ch] + r2[j + 1, ch]
                    t21 = r2[j + 1, ch] - r1[j + 1, ch]
                    t31 = r1[j + 1, ch] - r3[j + 1, ch]
                    t02 = r0[j + 2, ch] - r2[j + 2, ch]
                    t12 = r1[j + 2, ch] + r2[j + 2, ch]
                    t22 = r2[j + 2, ch] - r1[j + 2, ch]
                    t32 = r1[j + 2, ch] - r3[j + 2, ch]
                    t03 = r0[j + 3, ch] - r2[j + 3, ch]
                    t13 = r1[j + 3, ch] + r2[j + 3, ch]
                    t23 = r2[j + 3, ch] - r1[j + 3, ch]
                    t33 = r1[j + 3, ch] - r3[j + 3, ch]
                    # then columns ((B^T d) B)
                    v[n, ty, tx, 0, ch] = t00 - t02
                    v[n, ty, tx, 1, ch] = t01 + t02
                    v[n, ty, tx, 2, ch] = t02 - t01
                    v[n, ty, tx, 3, ch] = t01 - t03
                    v[n, ty, tx, 4, ch] = t10 - t12
                    v[n, ty, tx, 5, ch] = t11 + t12
                    v[n, ty, tx, 6, ch] = t12 - t11
                    v[n, ty, tx, 7, ch] = t11 - t13
                    v[n, ty, tx, 8, ch] = t20 - t22
                    v[n, ty, tx, 9, ch] = t21 + t22
                    v[n, ty, tx, 10, ch] = t22 - t21
                    v[n, ty, tx, 11, ch] = t21 - t23
                    v[n, ty, tx, 12, ch] = t30 - t32
                    v[n, ty, tx, 13, ch] = t31 + t32
                    v[n, ty, tx, 14, ch] = t32 - t31
                    v[n, ty, tx, 15, ch] = t31 - t33


@accel.jit
def _wino_out(m, bias, out, lo, hi):  # pragma: no cover - compiled
    """``out[n, 2*ty + a, 2*tx + b, o] = clamp((A^T M A)[a, b] + bias[o])`` of tile (ty, tx)
    of ``m`` [N, TH, TW, 16, O] (tile-major, as ``_wino_in``), cropped to ``out``'s size."""
    nb, oh, ow, o = out.shape
    th, tw = m.shape[1], m.shape[2]
    for n in range(nb):
        for ty in range(th):
            y = 2 * ty
            r0 = out[n, y]
            r1 = out[n, y + 1] if y + 1 < oh else out[n, y]  # (not written when cropped)
            for tx in range(tw):
                x = 2 * tx
                mt = m[n, ty, tx]
                if y + 1 < oh and x + 1 < ow:
                    for k in range(o):
                        # A^T M over tile rows: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3
                        s00 = mt[0, k] + mt[4, k] + mt[8, k]
                        s01 = mt[1, k] + mt[5, k] + mt[9, k]
                        s02 = mt[2, k] + mt[6, k] + mt[10, k]
                        s03 = mt[3, k] + mt[7, k] + mt[11, k]
                        s10 = mt[4, k] - mt[8, k] - mt[12, k]
                        s11 = mt[5, k] - mt[9, k] - mt[13, k]
                        s12 = mt[6, k] - mt[10, k] - mt[14, k]
                        s13 = mt[7, k] - mt[11, k] - mt[15, k]
                        b = bias[k]
                        # then over tile columns: y0 = s0 + s1 + s2, y1 = s1 - s2 - s3
                        r0[x, k] = min(max((s00 + s01 + s02) + b, lo), hi)
                        r0[x + 1, k] = min(max((s01 - s02 - s03) + b, lo), hi)
                        r1[x, k] = min(max((s10 + s11 + s12) + b, lo), hi)
                        r1[x + 1, k] = min(max((s11 - s12 - s13) + b, lo), hi)
                    continue
                for k in range(o):  # a tile over the bottom or right edge of the output
                    s00 = mt[0, k] + mt[4, k] + mt[8, k]
                    s01 = mt[1, k] + mt[5, k] + mt[9, k]
                    s02 = mt[2, k] + mt[6, k] + mt[10, k]
                    s03 = mt[3, k] + mt[7, k] + mt[11, k]
                    s10 = mt[4, k] - mt[8, k] - mt[12, k]
                    s11 = mt[5, k] - mt[9, k] - mt[13, k]
                    s12 = mt[6, k] - mt[10, k] - mt[14, k]
                    s13 = mt[7, k] - mt[11, k] - mt[15, k]
                    b = bias[k]
                    r0[x, k] = min(max((s00 + s01 + s02) + b, lo), hi)
                    if x + 1 < ow:
                        r0[x + 1, k] = min(max((s01 - s02 - s03) + b, lo), hi)
                    if y + 1 < oh:
                        r1[x, k] = min(max((s10 + s11 + s12) + b, lo), hi)
                        if x + 1 < ow:
                            r1[x + 1, k] = min(max((s11 - s12 - s13) + b, lo), hi)


def winograd_input(xb: np.ndarray, v: np.ndarray) -> None:
    """``v`` (N, TH, TW, 16, C) = the transformed tiles of ``xb`` (see ``winograd``)."""
    _wino_in(xb, v)


def winograd_output(m: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                    lo: float = -np.inf, hi: float = np.inf) -> np.ndarray:
    """``out`` (N, OH, OW, O) from the 16 GEMM results ``m`` (N, TH, TW, 16, O)."""
    b = np.zeros(out.shape[3], out.dtype) if bias is None else bias
    _wino_out(m, np.ascontiguousarray(b, out.dtype), out, out.dtype.type(lo),
              out.dtype.type(hi))
    return out


@accel.jit
def _bias_clamp(out, bias, lo, hi):  # pragma: no cover - compiled
    m, o = out.shape
    for i in range(m):
        for k in range(o):
            v = out[i, k] + bias[k]
            out[i, k] = lo if v < lo else (hi if v > hi else v)


def bias_clamp(out: np.ndarray, bias: np.ndarray | None, lo: float = -np.inf,
               hi: float = np.inf) -> np.ndarray:
    """``out`` (M, O) += bias, clamped to [lo, hi], in one pass (a GEMM's epilogue; NumPy's
    broadcast add alone costs twice a plain pass over (M, O))."""
    b = np.zeros(out.shape[1], out.dtype) if bias is None else bias
    _bias_clamp(out, np.ascontiguousarray(b, out.dtype), out.dtype.type(lo), out.dtype.type(hi))
    return out


# ---- max pooling (XNNPACK's NHWC pooling) ----------------------------------------------------
# NumPy takes one ``np.maximum`` pass over the output per tap (9 for ResNet-18's 3x3 pool:
# 0.9 ms in the graph, 0.4 ms compiled). (A compiled im2col was 3-7x slower than NumPy's
# single strided copy, so patch matrices stay NumPy's.)


@accel.jit
def _max_pool(x, out, kh, kw, sh, sw, dh, dw, pt, pl, low):  # pragma: no cover - compiled
    """``out[n, oy, ox, c] = max`` over the window's cells inside ``x``; NaN wins, as
    ``np.maximum`` lets it; a window entirely in the padding gives ``low`` (-inf, or an
    integer type's minimum)."""
    nb, h, wd, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for n in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                o = out[n, oy, ox]
                first = True
                for i in range(kh):
                    iy = oy * sh - pt + i * dh
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = ox * sw - pl + j * dw
                        if ix < 0 or ix >= wd:
                            continue
                        src = x[n, iy, ix]
                        if first:
                            for ch in range(c):
                                o[ch] = src[ch]
                            first = False
                        else:
                            for ch in range(c):
                                v = src[ch]
                                if v > o[ch] or v != v:
                                    o[ch] = v
                if first:  # a window entirely in the padding
                    for ch in range(c):
                        o[ch] = low


def max_pool_nhwc(x: np.ndarray, out: np.ndarray, kernel: tuple[int, int],
                  stride: tuple[int, int], dilation: tuple[int, int],
                  pad: tuple[int, int]) -> np.ndarray:
    """Max pooling of float or int8 ``x`` [N, H, W, C] into ``out`` [N, OH, OW, C] in one
    pass; padded cells never win (``pad`` = (top, left))."""
    low = x.dtype.type(np.iinfo(x.dtype).min if x.dtype.kind == "i" else -np.inf)
    _max_pool(np.ascontiguousarray(x), out, kernel[0], kernel[1], stride[0], stride[1],
              dilation[0], dilation[1], pad[0], pad[1], low)
    return out
