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


@accel.jit(inline="always")  # inlined into its callers (a call costs reference counting)
def _leaf(a, b, m, zero):  # pragma: no cover - compiled
    """NumPy's ``pairwise_sum`` of a block ``a[b:b + m]`` of at most 128 values: one after the
    other from 0 below 8 values, otherwise 8 partial sums added pairwise, then the rest."""
    if m < 8:
        res = zero
        for i in range(b, b + m):
            res = res + a[i]
        return res
    r0, r1, r2, r3 = a[b], a[b + 1], a[b + 2], a[b + 3]
    r4, r5, r6, r7 = a[b + 4], a[b + 5], a[b + 6], a[b + 7]
    end = b + m - m % 8
    for j in range(b + 8, end, 8):
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, b + m):
        res = res + a[i]
    return res


@accel.jit(inline="always")
def _leaf_squares(a, b, m, zero):  # pragma: no cover - compiled
    """``_leaf`` of ``a * a`` (each square rounded to the dtype, as NumPy's ``d * d``)."""
    if m < 8:
        res = zero
        for i in range(b, b + m):
            res = res + a[i] * a[i]
        return res
    r0, r1, r2, r3 = a[b] * a[b], a[b + 1] * a[b + 1], a[b + 2] * a[b + 2], a[b + 3] * a[b + 3]
    r4, r5 = a[b + 4] * a[b + 4], a[b + 5] * a[b + 5]
    r6, r7 = a[b + 6] * a[b + 6], a[b + 7] * a[b + 7]
    end = b + m - m % 8
    for j in range(b + 8, end, 8):
        r0 += a[j] * a[j]
        r1 += a[j + 1] * a[j + 1]
        r2 += a[j + 2] * a[j + 2]
        r3 += a[j + 3] * a[j + 3]
        r4 += a[j + 4] * a[j + 4]
        r5 += a[j + 5] * a[j + 5]
        r6 += a[j + 6] * a[j + 6]
        r7 += a[j + 7] * a[j + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, b + m):
        res = res + a[i] * a[i]
    return res


# What the loops below call: the Python sources until ``_compile`` swaps in the compiled
# loops (numba binds a global's value when it compiles the caller).
_leaf_fn, _leaf_squares_fn = _leaf.py_func, _leaf_squares.py_func


@accel.jit(error_model="numpy")  # x / 0 is inf or nan, as in NumPy
def _pairwise(a, lo, n, square, zero, st, vals):  # pragma: no cover - compiled
    """NumPy's pairwise sum of ``a[lo:lo + n]`` (of ``a * a`` when ``square``), without
    recursion: blocks of more than 128 values are halved (at a multiple of 8, as NumPy does)
    walking the tree with an explicit stack, and the leaves summed by ``_leaf``."""
    if n <= 128:
        return _leaf_squares_fn(a, lo, n, zero) if square else _leaf_fn(a, lo, n, zero)
    # st[:, k] = (start, count, state) of the k-th pending block, state 0: not visited yet,
    # 1: both halves summed (add them); ``vals`` the sums waiting to be added (scratch of 64)
    st_lo, st_n, st_s = st[0], st[1], st[2]
    vp = 0
    st_lo[0], st_n[0], st_s[0] = lo, n, 0
    sp = 1
    while sp > 0:
        sp -= 1
        b, m, s = st_lo[sp], st_n[sp], st_s[sp]
        if s == 1:
            vp -= 1
            vals[vp - 1] = vals[vp - 1] + vals[vp]
        elif m <= 128:
            vals[vp] = _leaf_squares_fn(a, b, m, zero) if square else _leaf_fn(a, b, m, zero)
            vp += 1
        else:
            half = m // 2
            half -= half % 8
            st_lo[sp], st_n[sp], st_s[sp] = b, m, 1  # come back to add the two halves
            st_lo[sp + 1], st_n[sp + 1], st_s[sp + 1] = b + half, m - half, 0
            st_lo[sp + 2], st_n[sp + 2], st_s[sp + 2] = b, half, 0  # popped first: left half
            sp += 3
    return vals[0]


_sum = _pairwise.py_func  # what the row loops call (swapped in by ``_compile``, as above)


@accel.jit(error_model="numpy")  # x / 0 is inf or nan, as in NumPy
def _layer_norm(x, w, b, has_w, has_b, n, eps, one, zero, y, mean, rstd):  # pragma: no cover
    """Per row of ``x`` (rows, n): mean = sum / n, d = x - mean, var = sum(d * d) / n,
    rstd = 1 / sqrt(var + eps), y = d * rstd (* w) (+ b); ``d`` lives in ``y``."""
    rows, size = x.shape
    short = size <= 128
    st = np.empty((3, 0 if short else 64), np.int64)  # the pairwise stack of long rows
    vals = np.empty(0 if short else 64, x.dtype)
    for r in range(rows):
        xr = x[r]
        yr = y[r]
        if short:  # (a call with fewer arrays: each costs reference counting)
            m = _leaf_fn(xr, 0, size, zero) / n
        else:
            m = _sum(xr, 0, size, False, zero, st, vals) / n
        for i in range(size):
            yr[i] = xr[i] - m
        if short:
            var = _leaf_squares_fn(yr, 0, size, zero) / n
        else:
            var = _sum(yr, 0, size, True, zero, st, vals) / n
        s = one / np.sqrt(var + eps)
        if has_w and has_b:  # (one loop each: no test per element)
            for i in range(size):
                yr[i] = (yr[i] * s) * w[i] + b[i]
        elif has_w:
            for i in range(size):
                yr[i] = (yr[i] * s) * w[i]
        elif has_b:
            for i in range(size):
                yr[i] = yr[i] * s + b[i]
        else:
            for i in range(size):
                yr[i] = yr[i] * s
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


def _compile() -> None:
    """Compile the row sums the loops call, innermost first (once per process)."""
    global _leaf_fn, _leaf_squares_fn, _sum
    if _sum is _pairwise.py_func:
        _leaf_fn, _leaf_squares_fn = _leaf.compiled(), _leaf_squares.compiled()
        _sum = _pairwise.compiled()


def layer_norm_loop(*args) -> None:
    """``_layer_norm(*args)``, compiled on the first call (with the row sum it calls)."""
    _compile()
    _layer_norm.compiled()(*args)


def row_mean(x: np.ndarray, n, out: np.ndarray) -> None:
    """``_row_mean``, compiled on the first call."""
    _row_mean.compiled()(x, n, out)


@accel.jit
def _any_rows(x, out):  # pragma: no cover - compiled
    """``out[r] = x[r, 0] or x[r, 1] or ...`` of a bool matrix (exact: any order)."""
    rows, size = x.shape
    for r in range(rows):
        found = False
        for i in range(size):
            found |= x[r, i]
        out[r] = found


def any_rows(x: np.ndarray, out: np.ndarray) -> None:
    """``_any_rows``, compiled on the first call."""
    _any_rows.compiled()(x, out)


@accel.jit
def _masked_rows_zero(x, s, out):  # pragma: no cover - compiled
    """``out[r] = 0`` where every ``x[r, i]`` is -inf, else ``s[r]``: the tail of the "safe"
    softmax of an attention whose mask hides a whole row."""
    rows, size = x.shape
    ninf = -np.inf
    for r in range(rows):
        masked = True
        for i in range(size):
            if x[r, i] != ninf:
                masked = False
                break
        if masked:
            for i in range(size):
                out[r, i] = 0
        else:
            for i in range(size):
                out[r, i] = s[r, i]


def masked_rows_zero(x: np.ndarray, s: np.ndarray, out: np.ndarray) -> None:
    """``_masked_rows_zero`` on (rows, size) matrices, compiled on the first call."""
    _masked_rows_zero.compiled()(x, s, out)


# ---- a folded BatchNorm's epilogue: per-channel bias and the activation after it ---------


@accel.jit(inline="always")
def _bias_act(v, b, lo, hi, relu):  # pragma: no cover - compiled
    """``v + b`` clamped as the activation kernel clamps: hardtanh is ``np.clip`` (max(v, lo)
    as ``v > lo ? v : lo``, so -0.0 becomes lo; NaN stays), relu ``np.maximum(v, 0)``
    (``v >= 0 ? v : 0``, -0.0 stays)."""
    v = v + b
    if v == v:  # NaN passes through both
        if relu:
            v = v if v >= lo else lo
        else:
            v = v if v > lo else lo
            v = v if v < hi else hi
    return v


@accel.jit
def _channel_bias_clamp(out, bias, lo, hi, relu):  # pragma: no cover - compiled
    """``out`` (N, C, P) = ``_bias_act(out, bias[c])`` in place."""
    nb, c, p = out.shape
    for n in range(nb):
        for ch in range(c):
            b = bias[ch]
            row = out[n, ch]
            for i in range(p):
                row[i] = _bias_act(row[i], b, lo, hi, relu)


@accel.jit
def _channel_bias_clamp_from(src, out, bias, lo, hi, relu):  # pragma: no cover - compiled
    """``_channel_bias_clamp`` reading ``src`` (N, C, P), writing ``out`` (apart from it;
    a separate loop: one array read and written in place vectorizes, two that might overlap
    would not)."""
    nb, c, p = out.shape
    for n in range(nb):
        for ch in range(c):
            b = bias[ch]
            row, res = src[n, ch], out[n, ch]
            for i in range(p):
                res[i] = _bias_act(row[i], b, lo, hi, relu)


def channel_bias_clamp(src: np.ndarray, out: np.ndarray, bias: np.ndarray, lo, hi,
                       relu: bool) -> None:
    """``out`` = clamp(src + bias per channel), both viewed (N, C, P) (contiguous; ``src`` is
    ``out`` or apart from it), ``lo``/``hi`` of their dtype."""
    if src is out:
        _channel_bias_clamp.compiled()(out, bias, lo, hi, relu)
    else:
        _channel_bias_clamp_from.compiled()(src, out, bias, lo, hi, relu)


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
    short = size <= 128
    st = np.empty((3, 0 if short else 64), np.int64)
    vals = np.empty(0 if short else 64, e.dtype)
    for r in range(rows):
        er = e[r]
        s = _leaf_fn(er, 0, size, zero) if short else _sum(er, 0, size, False, zero, st, vals)
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
    _compile()
    loop.compiled()(*args)
