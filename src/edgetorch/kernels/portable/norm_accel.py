"""Normalisation loops compiled with numba (the optional ``accel`` extra, ``kernels.accel``).

The prepared layer norm (``prepared._layer_norm``) takes a dozen NumPy calls per instruction,
each a microsecond of dispatch on the small rows of a transformer (16 rows of 64). One
compiled loop does the whole instruction, row by row, with the very operations of the kernel
(``nn.native_layer_norm_out``) in float32 (or float64) and in its order, so the bits are the
kernel's:

* the row sums are NumPy's pairwise summation (``np.add.reduce`` over a contiguous row: eight
  interleaved partial sums per block of at most 128 values, blocks split in halves rounded to
  a multiple of 8), reproduced here step for step;
* every product, quotient and square root is rounded to the tensor's dtype as NumPy's ufuncs
  round them (no fused multiply-add: numba compiles without fast-math).

The prepared RMSNorm mean (``prepared._mean``) sums each row element after element, as the
kernel's ``reduction._ordered_sum`` does.

Callers check ``accel.available()`` and otherwise take their NumPy path.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import accel

# NumPy's inner reduction loop sees a whole contiguous row up to its buffer size; longer rows
# would be summed in chunks: the NumPy path takes them.
MAX_ROW = 8192


@accel.jit(error_model="numpy")  # x / 0 is inf or nan, as in NumPy
def _pairwise(a, lo, n, square, zero, st, vals):  # pragma: no cover - compiled
    """NumPy's pairwise sum of ``a[lo:lo + n]`` (of ``a * a`` when ``square``), without
    recursion: the halving tree is walked with an explicit stack, leaves summed as NumPy's
    ``pairwise_sum`` does (n < 8: one after the other from 0; otherwise 8 partial sums)."""
    # st[:, k] = (start, count, state) of the k-th pending block, state 0: not visited yet,
    # 1: both halves summed (add them); ``vals`` the sums waiting to be added (scratch of 64)
    st_lo, st_n, st_s = st[0], st[1], st[2]
    sp, vp = 0, 0
    st_lo[0], st_n[0], st_s[0] = lo, n, 0
    sp = 1
    while sp > 0:
        sp -= 1
        b, m, s = st_lo[sp], st_n[sp], st_s[sp]
        if s == 1:
            vp -= 1
            right = vals[vp]
            vals[vp - 1] = vals[vp - 1] + right
            continue
        if m <= 128:
            if m < 8:
                res = zero
                for i in range(b, b + m):
                    v = a[i] * a[i] if square else a[i]
                    res = res + v
            else:
                if square:
                    r0, r1, r2, r3 = a[b] * a[b], a[b + 1] * a[b + 1], a[b + 2] * a[b + 2], \
                        a[b + 3] * a[b + 3]
                    r4, r5, r6, r7 = a[b + 4] * a[b + 4], a[b + 5] * a[b + 5], \
                        a[b + 6] * a[b + 6], a[b + 7] * a[b + 7]
                else:
                    r0, r1, r2, r3 = a[b], a[b + 1], a[b + 2], a[b + 3]
                    r4, r5, r6, r7 = a[b + 4], a[b + 5], a[b + 6], a[b + 7]
                i = 8
                end = m - m % 8
                while i < end:
                    j = b + i
                    if square:
                        r0 += a[j] * a[j]
                        r1 += a[j + 1] * a[j + 1]
                        r2 += a[j + 2] * a[j + 2]
                        r3 += a[j + 3] * a[j + 3]
                        r4 += a[j + 4] * a[j + 4]
                        r5 += a[j + 5] * a[j + 5]
                        r6 += a[j + 6] * a[j + 6]
                        r7 += a[j + 7] * a[j + 7]
                    else:
                        r0 += a[j]
                        r1 += a[j + 1]
                        r2 += a[j + 2]
                        r3 += a[j + 3]
                        r4 += a[j + 4]
                        r5 += a[j + 5]
                        r6 += a[j + 6]
                        r7 += a[j + 7]
                    i += 8
                res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
                while i < m:
                    v = a[b + i] * a[b + i] if square else a[b + i]
                    res = res + v
                    i += 1
            vals[vp] = res
            vp += 1
            continue
        half = m // 2
        half -= half % 8
        st_lo[sp], st_n[sp], st_s[sp] = b, m, 1  # come back to add the two halves
        st_lo[sp + 1], st_n[sp + 1], st_s[sp + 1] = b + half, m - half, 0
        st_lo[sp + 2], st_n[sp + 2], st_s[sp + 2] = b, half, 0  # popped first: left half
        sp += 3
    return vals[0]


# What ``_layer_norm`` calls: the Python source until ``layer_norm`` compiles it, then the
# compiled loop (numba binds a global's value when it compiles the caller).
_sum = _pairwise.py_func


@accel.jit(error_model="numpy")  # x / 0 is inf or nan, as in NumPy
def _layer_norm(x, w, b, has_w, has_b, n, eps, one, zero, y, mean, rstd):  # pragma: no cover
    """Per row of ``x`` (rows, n): mean = sum / n, d = x - mean, var = sum(d * d) / n,
    rstd = 1 / sqrt(var + eps), y = d * rstd (* w) (+ b); ``d`` lives in ``y``."""
    rows, size = x.shape
    st = np.empty((3, 64), np.int64)
    vals = np.empty(64, x.dtype)
    for r in range(rows):
        xr = x[r]
        yr = y[r]
        m = _sum(xr, 0, size, False, zero, st, vals) / n
        for i in range(size):
            yr[i] = xr[i] - m
        var = _sum(yr, 0, size, True, zero, st, vals) / n
        s = one / np.sqrt(var + eps)
        for i in range(size):
            v = yr[i] * s
            if has_w:
                v = v * w[i]
            if has_b:
                v = v + b[i]
            yr[i] = v
        mean[r] = m
        rstd[r] = s


@accel.jit(error_model="numpy")  # x / 0 is inf or nan, as in NumPy
def _row_mean(x, n, out):  # pragma: no cover - compiled
    """``out[r] = (x[r, 0] + x[r, 1] + ...) / n``, added one after the other (rows of at
    least one element)."""
    rows, size = x.shape
    for r in range(rows):
        s = x[r, 0]
        for i in range(1, size):
            s = s + x[r, i]
        out[r] = s / n


def layer_norm_loop(*args) -> None:
    """``_layer_norm(*args)``, compiled on the first call (with the row sum it calls)."""
    global _sum
    if _sum is _pairwise.py_func:
        _sum = _pairwise.compiled()
    _layer_norm.compiled()(*args)


def row_mean(x: np.ndarray, n, out: np.ndarray) -> None:
    """``_row_mean``, compiled on the first call."""
    _row_mean.compiled()(x, n, out)


# ---- a folded BatchNorm's epilogue: per-channel bias and the activation after it ---------


@accel.jit
def _channel_bias_clamp(out, bias, lo, hi, relu):  # pragma: no cover - compiled
    """``out`` (N, C, P) += bias[c], then clamped as the activation kernel clamps: hardtanh
    is ``np.clip`` (max(v, lo) as ``v > lo ? v : lo``, so -0.0 becomes lo; NaN stays),
    relu ``np.maximum(v, 0)`` (``v >= 0 ? v : 0``, -0.0 stays)."""
    nb, c, p = out.shape
    for n in range(nb):
        for ch in range(c):
            b = bias[ch]
            row = out[n, ch]
            for i in range(p):
                v = row[i] + b
                if v == v:  # NaN passes through both
                    if relu:
                        v = v if v >= lo else lo
                    else:
                        v = v if v > lo else lo
                        v = v if v < hi else hi
                row[i] = v


def channel_bias_clamp(out: np.ndarray, bias: np.ndarray, lo, hi, relu: bool) -> None:
    """``_channel_bias_clamp`` on ``out`` viewed (N, C, P) (contiguous), ``lo``/``hi`` of
    its dtype."""
    _channel_bias_clamp.compiled()(out, bias, lo, hi, relu)


# ---- softmax over the last axis: the two row passes around NumPy's exp ------------------


@accel.jit
def _softmax_shift(x, lo, zero, e):  # pragma: no cover - compiled
    """``e[r] = x[r] - m[r]``, ``m`` the row's max (``zero`` when it is not finite: all -inf
    rows give nan, as torch; a NaN max gives NaN rows), as the kernel's ``_shifted``;
    ``lo`` = -inf of the dtype."""
    rows, size = x.shape
    for r in range(rows):
        xr = x[r]
        m = lo
        for i in range(size):
            v = xr[i]
            if v != v:
                m = v
                break
            if v > m:
                m = v
        if not np.isfinite(m):
            m = zero
        er = e[r]
        for i in range(size):
            er[i] = xr[i] - m


@accel.jit(error_model="numpy")  # x / 0 is inf or nan, as in NumPy
def _softmax_scale(e, zero, out):  # pragma: no cover - compiled
    """``out[r] = e[r] / sum(e[r])``, the sum NumPy's pairwise one (as ``np.sum``)."""
    rows, size = e.shape
    st = np.empty((3, 64), np.int64)
    vals = np.empty(64, e.dtype)
    for r in range(rows):
        er = e[r]
        s = _sum(er, 0, size, False, zero, st, vals)
        orow = out[r]
        for i in range(size):
            orow[i] = er[i] / s


def softmax_steps(x: np.ndarray, e: np.ndarray, out: np.ndarray) -> list:
    """The prepared softmax over the last axis of 2-d contiguous (rows, n) views: shift by
    the row max (compiled), NumPy's exp in place (the kernel's own exp: NumPy's and numba's
    exp may round differently), normalise (compiled)."""
    ct = x.dtype.type
    return [partial(_call, _softmax_shift, (x, ct(-np.inf), ct(0), e)),
            partial(np.exp, e, out=e),
            partial(_call, _softmax_scale, (e, ct(0), out))]


def _call(loop, args) -> None:
    global _sum
    if _sum is _pairwise.py_func:
        _sum = _pairwise.compiled()
    loop.compiled()(*args)
