"""Float32 GELU (erf) and last-axis softmax for small, fixed-shape tensors, with buffers
allocated once per node (the XNNPACK backend's GELU and softmax nodes use them).

**GELU.** ``gelu(x) = x * (1/2 + erf(x/sqrt 2)/2)``. The float64 erf of the portable kernels
(a Taylor table, ~25 passes in float64 plus gathers) costs ~100 us for 4096 values; here
``erf(x/sqrt 2)/2`` is one rational function of ``x``, fitted for this module (weighted least
squares iterated towards minimax on ``[0, 5.5]``, 1.5e-8 in float64)::

    erf(x/sqrt 2)/2 ~ x * P(x^2) / Q(x^2),  x clamped to [-5.5, 5.5]

with ``P``, ``Q`` of degree 5 in ``x^2``. Evaluated in float32 it stays within 2e-6 of the
exact GELU over [-12, 12] (float32 rounding of ``x`` itself dominates; torch's float32 GELU is
1.2e-6 from exact), and beyond the clamp ``erf`` is 1 to float32 precision, so large inputs
give ``x`` and ``0``. NumPy evaluates it in 27 passes of float32 ufuncs into preallocated
buffers; with the ``accel`` extra, numba runs the same formula in one vectorised loop.

**Softmax.** For a short last axis (attention rows of 16 keys), ``np.max(axis=-1)`` walks
every row separately (~8 us for 128 rows of 16); halving the rows with ``np.maximum`` over
their two halves takes log2(n) whole-array passes, and the row sums are one matrix-vector
product (BLAS). Numerics: ``exp(x - max) / sum``, as torch and XNNPACK compute it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import accel

CLAMP = 5.5
# erf(x/sqrt 2)/2 ~ x * P(x^2) / Q(x^2) on [-CLAMP, CLAMP]; coefficients from degree 0 up.
P = (0.3989422557386119, 0.03317184691295133, 0.004632976243155844, 0.000161778846547636,
     6.292442565344116e-06, 2.3177063027284774e-08)
Q = (1.0, 0.2498157294550998, 0.02824993353445588, 0.0018439077898031809,
     7.135143302731294e-05, 1.205801646918578e-06)

# P stretched by 4e-7: at the clamps 1/2 + x P/Q then lands just outside [0, 1] and is held
# there, so GELU is exactly x beyond +5.5 and exactly 0 below -5.5 (-inf gives nan, as torch)
# instead of x times the fit's 1e-8 residue; inside, it moves the result by < 2e-7 |x|.
STRETCH = 1 + 4e-7
PS = tuple(v * STRETCH for v in P)
F32 = np.dtype(np.float32)
Unary = Callable[[np.ndarray], np.ndarray]


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised array starting on a 64-byte boundary: NumPy's own small arrays are
    16-byte aligned, and AVX-512 passes over a buffer split across cache lines measured up to
    2x slower on these 4096-value activations."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start : start + n].view(dtype).reshape(shape)


@accel.jit(fastmath=True, error_model="numpy")
def _gelu_loop(x, out):  # pragma: no cover - compiled by numba (tests run it compiled)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    p0, p1, p2, p3, p4, p5 = (np.float32(PS[0]), np.float32(PS[1]), np.float32(PS[2]),
                              np.float32(PS[3]), np.float32(PS[4]), np.float32(PS[5]))
    q1, q2, q3, q4, q5 = (np.float32(Q[1]), np.float32(Q[2]), np.float32(Q[3]),
                          np.float32(Q[4]), np.float32(Q[5]))
    lo, hi = np.float32(-CLAMP), np.float32(CLAMP)
    half, zero, one = np.float32(0.5), np.float32(0), np.float32(1)
    for k in range(xf.size):
        v = xf[k]
        c = min(max(v, lo), hi)
        s = c * c
        p = ((((p5 * s + p4) * s + p3) * s + p2) * s + p1) * s + p0
        q = ((((q5 * s + q4) * s + q3) * s + q2) * s + q1) * s + np.float32(1.0)
        of[k] = v * min(max(half + c * p / q, zero), one)


_P32 = tuple(np.float32(v) for v in PS)
_Q32 = tuple(np.float32(v) for v in Q)
_HALF32 = np.float32(0.5)
_LO, _HI = np.asarray(-CLAMP, F32), np.asarray(CLAMP, F32)
_ZERO, _ONE = np.asarray(0, F32), np.asarray(1, F32)


def gelu_numpy(x: np.ndarray, out: np.ndarray, c: np.ndarray, s: np.ndarray,
               t: np.ndarray) -> np.ndarray:
    """The rational GELU in float32 passes; ``c``, ``s``, ``t`` are scratch like ``x``.
    (Scalars are float32 and clamps the clip ufunc itself: NumPy's Python-level wrappers
    and Python-float operands cost more than the 4096-value passes.)"""
    x.clip(_LO, _HI, out=c)  # (the array's method: without np.clip's wrappers)
    np.multiply(c, c, out=s)
    np.multiply(s, _P32[5], out=t)
    for coef in _P32[4:0:-1]:
        np.add(t, coef, out=t)
        np.multiply(t, s, out=t)
    np.add(t, _P32[0], out=t)
    np.multiply(t, c, out=t)  # x * P(x^2)
    np.multiply(s, _Q32[5], out=c)
    for coef in _Q32[4:0:-1]:
        np.add(c, coef, out=c)
        np.multiply(c, s, out=c)
    np.add(c, _Q32[0], out=c)
    np.divide(t, c, out=t)
    np.add(t, _HALF32, out=t)
    t.clip(_ZERO, _ONE, out=t)
    return np.multiply(x, t, out=out)


def prepare_gelu(shape: tuple[int, ...]) -> Unary:
    """GELU of float32 arrays of ``shape`` into one output buffer (returned by each call;
    the next call overwrites it)."""
    out, c, s, t = (aligned_empty(shape, F32) for _ in range(4))

    def run(x: np.ndarray) -> np.ndarray:
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if accel.available():
            _gelu_loop(x, out)
            return out
        return gelu_numpy(x, out, c, s, t)
    return run


def gelu_f32(x: np.ndarray) -> np.ndarray:
    """A fresh GELU of a float32 array (any shape)."""
    return prepare_gelu(x.shape)(x)


SHORT_ROWS = 64  # rows up to this length are reduced across, transposed


def prepare_softmax(shape: tuple[int, ...], dtype: np.dtype) -> Unary:
    """Softmax over the last axis of arrays of ``shape`` into one output buffer.

    Short rows are worked on transposed: ``(n, rows)``, so the max and the sum reduce over the
    outer axis, a few whole-array passes, instead of NumPy's per-row inner loops (~16 us for
    128 rows of 16, against ~1.5 us a pass); the two transposing copies cost ~1 us each."""
    n = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    out = aligned_empty(shape, dtype)
    o2 = out.reshape(rows, n)
    short = n <= SHORT_ROWS
    work = aligned_empty((n, rows) if short else (rows, n), dtype)
    red = np.empty((1, rows) if short else (rows, 1), dtype)
    axis = 0 if short else 1

    def run(x: np.ndarray) -> np.ndarray:
        x2 = x.reshape(rows, n)
        np.copyto(work, x2.T if short else x2)
        np.maximum.reduce(work, axis=axis, keepdims=True, out=red)
        np.subtract(work, red, out=work)
        np.exp(work, out=work)
        np.add.reduce(work, axis=axis, keepdims=True, out=red)
        np.divide(work, red, out=work)
        np.copyto(o2, work.T if short else work)
        return out
    return run


def softmax_last(x: np.ndarray) -> np.ndarray:
    """A fresh softmax over the last axis (any shape, float)."""
    if x.ndim == 0 or x.size == 0:
        e = np.exp(x - np.max(x, axis=-1, keepdims=True)) if x.size else x.copy()
        return e / np.sum(e, axis=-1, keepdims=True) if x.size else e
    return prepare_softmax(x.shape, x.dtype)(np.ascontiguousarray(x))


__all__ = ["CLAMP", "P", "Q", "gelu_f32", "gelu_numpy", "prepare_gelu", "prepare_softmax",
           "softmax_last"]
