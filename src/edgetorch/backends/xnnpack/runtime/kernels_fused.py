"""Compiled loops (the ``accel`` extra, numba) for the XNNPACK runtime's small fused steps.

On the tensors of a small transformer (a few thousand values) a NumPy call costs more than
the pass it makes, so a chain of them is paid per call, not per value. These loops do a chain
in one call with the same float32 operations in the same order as the NumPy calls they stand
for (no fastmath: no reassociation, no fused multiply-add), so they give the same bits; each
has a NumPy path for when numba is missing (``accel.available()``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....kernels import accel
from ....kernels import activation as act

F32 = np.dtype(np.float32)


def compiled() -> bool:
    return accel.available()


@accel.jit(error_model="numpy")
def _rms_tail_loop(x, m, eps, w, out):  # pragma: no cover - compiled by numba
    n = w.shape[0]
    rows = x.size // n
    xf, of, mf = x.reshape(rows, n), out.reshape(rows, n), m.reshape(rows)
    one = np.float32(1)
    for i in range(rows):
        r = one / np.sqrt(mf[i] + eps)  # XNNAdd, XNNReciprocalSquareRoot (1 / sqrt)
        for j in range(n):
            of[i, j] = (xf[i, j] * r) * w[j]  # the two XNNMultiply nodes


def rms_tail(x: np.ndarray, m: np.ndarray, eps: np.ndarray, w: np.ndarray,
             out: np.ndarray | None = None) -> np.ndarray:
    """``(x * (1 / sqrt(m + eps))) * w`` for ``x`` ``[..., n]``, ``m`` ``[..., 1]``, one
    ``eps``, ``w`` ``[..., n]`` (C-contiguous float32; numba only: NumPy would need the same
    five passes as the nodes)."""
    if out is None:
        out = np.empty(x.shape, F32)
    _rms_tail_loop.compiled()(x, m, eps.reshape(-1)[0], w.reshape(-1), out)
    return out


# ---- rotate-half RoPE -------------------------------------------------------------------


@accel.jit(error_model="numpy")
def _rope4_loop(x, c, s, h, out):  # pragma: no cover - compiled by numba
    n0, n1, n2 = x.shape[0], x.shape[1], x.shape[2]
    for i0 in range(n0):
        c0, s0 = min(i0, c.shape[0] - 1), min(i0, s.shape[0] - 1)  # (broadcast dims: 0)
        for i1 in range(n1):
            c1, s1 = min(i1, c.shape[1] - 1), min(i1, s.shape[1] - 1)
            for i2 in range(n2):
                c2, s2 = min(i2, c.shape[2] - 1), min(i2, s.shape[2] - 1)
                for d in range(h):
                    cv = c[c0, c1, c2, min(d, c.shape[3] - 1)]
                    sv = s[s0, s1, s2, min(d, s.shape[3] - 1)]
                    a, b = x[i0, i1, i2, d], x[i0, i1, i2, d + h]
                    out[i0, i1, i2, d] = a * cv - b * sv  # XNNSubtract of two XNNMultiply
                    out[i0, i1, i2, d + h] = a * sv + b * cv  # XNNAdd of two XNNMultiply


def _as4(a: np.ndarray) -> np.ndarray:
    return a if a.ndim == 4 else a.reshape((1,) * (4 - a.ndim) + a.shape)


def rope4(x: np.ndarray, c: np.ndarray, s: np.ndarray, h: int,
          out: np.ndarray | None = None) -> np.ndarray:
    """``cat(x1*c - x2*s, x1*s + x2*c)`` for a 4-D float32 ``x`` whose last axis holds
    ``x1``, ``x2`` (``h`` values each); ``c``, ``s`` broadcast against a half (numba only)."""
    if out is None:
        out = np.empty(x.shape, F32)
    _rope4_loop.compiled()(x, _as4(c), _as4(s), h, out)
    return out


# ---- softmax over short rows ----------------------------------------------------------------


@accel.jit(error_model="numpy")
def _shift_rows(x, out):  # pragma: no cover - compiled by numba
    """``out = x - max(x)`` per row; a NaN in the row makes the max NaN (np.maximum)."""
    rows, n = x.shape
    for i in range(rows):
        mx = x[i, 0]
        nan = mx != mx
        for j in range(1, n):  # (no branch on NaN inside: the loop vectorises)
            v = x[i, j]
            mx = v if v > mx else mx
            nan |= v != v
        if nan:
            mx = np.float32(np.nan)
        for j in range(n):
            out[i, j] = x[i, j] - mx


@accel.jit(error_model="numpy")
def _scale_mask(x, c, m, divide, out):  # pragma: no cover - compiled by numba
    """``out = x / c + m`` (``x * c + m`` unless ``divide``): the XNNDiv (XNNMultiply) and
    XNNAdd in one pass, float32 as the nodes round. ``x``, ``out`` 4-D; ``m`` 4-D, each of its
    dimensions ``x``'s or 1 (broadcast here: NumPy's broadcast_to costs more than the pass)."""
    n0, n1, n2, n = x.shape
    m0, m1, m2 = m.shape[0] > 1, m.shape[1] > 1, m.shape[2] > 1
    for a in range(n0):
        for b in range(n1):
            for r in range(n2):
                xr, orow = x[a, b, r], out[a, b, r]
                mr = m[a if m0 else 0, b if m1 else 0, r if m2 else 0]
                for j in range(n):
                    orow[j] = (xr[j] / c if divide else xr[j] * c) + mr[j]


@accel.jit(error_model="numpy")
def _divide_by_row_sums(e):  # pragma: no cover - compiled by numba
    rows, n = e.shape
    for i in range(rows):
        s = e[i, 0]
        for j in range(1, n):  # summed in order, as np.add.reduce over the leading axis
            s += e[i, j]
        for j in range(n):
            e[i, j] = e[i, j] / s


def prepare_softmax(shape: tuple[int, ...], dtype: np.dtype) -> Callable[[Any], Any]:
    """Softmax over the last axis of float32 arrays of ``shape`` into one output buffer.

    For short rows (``act.SHORT_ROWS``) with numba: the max-shift and the normalisation are
    one compiled loop each and the exponential stays NumPy's (its SIMD ``exp``): 3 calls
    instead of 7 (~12 -> ~2 us for 64 rows of 16). ``act.prepare_softmax`` sums short rows
    in order too (it reduces their transpose over the leading axis), so both give the same
    bits; otherwise ``act.prepare_softmax`` itself."""
    n = shape[-1] if shape else 0
    if not compiled() or np.dtype(dtype) != F32 or not 0 < n <= act.SHORT_ROWS:
        return act.prepare_softmax(shape, dtype)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    out = act.aligned_empty(shape, F32)
    o2 = out.reshape(rows, n)
    shift, divide = _shift_rows.compiled(), _divide_by_row_sums.compiled()

    def run(x: np.ndarray) -> np.ndarray:
        shift(np.ascontiguousarray(x).reshape(rows, n), o2)
        np.exp(o2, out=o2)
        divide(o2)
        return out
    return run


def masked_softmax_fits(x: np.ndarray, c: np.ndarray, m: np.ndarray) -> bool:
    """Whether :func:`masked_softmax` computes ``softmax(x / c + m)`` for these values as
    the nodes one by one would (where :func:`prepare_softmax` takes its compiled path)."""
    if not compiled() or not 0 < x.ndim <= 4 or not 0 < x.shape[-1] <= act.SHORT_ROWS:
        return False
    if any(v.dtype != F32 for v in (x, c, m)) or c.size != 1 or m.ndim > x.ndim:
        return False
    try:
        return np.broadcast_shapes(x.shape, m.shape) == x.shape
    except ValueError:
        return False


def masked_softmax(x: np.ndarray, c: np.ndarray, m: np.ndarray, divide: bool,
                   out: np.ndarray | None = None) -> np.ndarray:
    """``softmax(x / c + m)`` over the last axis (``x * c`` unless ``divide``): one compiled
    pass for the scale and the mask, then :func:`prepare_softmax`'s compiled max-shift,
    NumPy's exp and compiled normalisation;
    the same bits as the XNNDiv, XNNAdd and XNNSoftmax nodes (:func:`masked_softmax_fits`)."""
    if out is None:
        out = np.empty(x.shape, F32)
    shape = (1,) * (4 - x.ndim) + x.shape
    m4 = m.reshape((1,) * (4 - m.ndim) + m.shape)
    if m4.shape[3] != shape[3]:  # (a mask broadcast along the rows: not worth a loop of its own)
        m4 = np.ascontiguousarray(np.broadcast_to(m4, m4.shape[:3] + shape[3:]))
    _scale_mask.compiled()(x.reshape(shape), c.reshape(-1)[0], m4, divide, out.reshape(shape))
    flat = out.reshape(-1, shape[3])
    _shift_rows.compiled()(flat, flat)  # (in place: each row's max is taken before it shifts)
    np.exp(flat, out=flat)
    _divide_by_row_sums.compiled()(flat)
    return out
