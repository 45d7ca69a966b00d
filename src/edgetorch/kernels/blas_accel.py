"""A fully connected layer as ONE BLAS call, bias included (the ``accel`` extra, numba).

``out = x @ w + b`` through NumPy is two calls, ``np.matmul(x, w, out)`` then
``np.add(out, b, out)``, and on the small matrices of an encoder (32x64 @ 64x64: a 4 us
GEMM) their dispatch costs about as much as the product. Here one compiled call fills ``out``
with the bias and calls the BLAS that NumPy itself links (its bundled OpenBLAS,
``cblas_sgemm`` with ``beta = 1``), so the bias is added by the GEMM's own store. The sum is
rounded once instead of twice (``x @ w`` then ``+ b``): within one float32 rounding of the
NumPy path, and both the plan and the reference path of the XNNPACK runtime call this same
function, so they agree bit for bit.

The BLAS symbol is looked up once, in the library NumPy ships (``numpy.libs`` or
``numpy/.dylibs``: ``scipy_cblas_sgemm64_``, 64-bit integers) and checked on a small product
against ``np.matmul``; without numba, with another BLAS, or when the check fails,
:func:`ready` is False and callers run their NumPy path. numba refers to the symbol by name
(``llvmlite.binding.add_symbol``), so its on-disk cache of the loop stays valid across
processes.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading

import numpy as np

from . import accel

F32 = np.dtype(np.float32)
SYMBOL = "scipy_cblas_sgemm64_"  # cblas_sgemm of NumPy's scipy-openblas64 (ILP64) build
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
NO_BIAS = np.empty(0, F32)  # the bias argument of a layer without one

_SGEMM = None  # numba's handle on the symbol, set by _bind() before the loop compiles
_loop = None  # the compiled _fc_loop
_q8 = None  # the compiled _q8_fc_loop
_q8_conv = None  # the compiled _q8_conv_loop
_strided = None  # the compiled _fc_strided
_state: bool | None = None  # None: not looked up yet
_lock = threading.Lock()


def _library() -> str | None:
    """The OpenBLAS NumPy ships with (wheels: ``numpy.libs``, ``numpy/.dylibs``)."""
    here = os.path.dirname(np.__file__)
    for pattern in (os.path.join(here, os.pardir, "numpy.libs", "libscipy_openblas64_*"),
                    os.path.join(here, ".dylibs", "libscipy_openblas64_*")):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def _bind() -> bool:
    global _SGEMM
    path = _library()
    if path is None:
        return False
    try:
        address = ctypes.cast(getattr(ctypes.CDLL(path), SYMBOL), ctypes.c_void_p).value
    except (OSError, AttributeError):
        return False
    import llvmlite.binding as llvm  # numba's own dependency
    from numba import types

    llvm.add_symbol(SYMBOL, address)
    i, f, p = types.int64, types.float32, types.voidptr
    _SGEMM = types.ExternalFunction(SYMBOL, types.void(i, i, i, i, i, i, f, p, i, p, i, f, p, i))
    return True


def _self_check() -> bool:
    """The bound GEMM against np.matmul on a small product (both weight layouts, bias, and
    strided rows)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7)).astype(F32)
    w = rng.standard_normal((7, 3)).astype(F32)
    b = rng.standard_normal(3).astype(F32)
    want = np.matmul(x, w) + b
    for weights in (w, np.asfortranarray(w)):
        got = np.empty((5, 3), F32)
        layout = weights_layout(weights, b)
        if layout is None or not run(x, weights, b, got, False, layout) or \
                not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            return False
    x3 = rng.standard_normal((2, 5, 7)).astype(F32).transpose(1, 0, 2)  # strided rows
    got = np.empty((5, 2, 3), F32)
    return run(x3, w, b, got, False, weights_layout(w, b)) and \
        np.allclose(got, np.matmul(x3, w) + b, rtol=1e-5, atol=1e-5)


def ready() -> bool:
    """True when :func:`run` may be called: numba, and NumPy's OpenBLAS bound and checked."""
    state = _state
    if state is None:
        state = _initialise()
    return state and accel.available()


def _initialise() -> bool:
    global _state, _loop, _strided, _q8, _q8_conv
    if not accel.available():  # (decided when compiled kernels are on: asked again later)
        return False
    with _lock:
        if _state is None:
            ok = _bind()
            if ok:
                _loop, _strided = _fc_loop.compiled(), _fc_strided.compiled()
                _q8, _q8_conv = _q8_fc_loop.compiled(), _q8_conv_loop.compiled()
                ok = _self_check()
            _state = ok
    return _state


@accel.jit(error_model="numpy", before_load=_bind)  # (cached code calls the symbol)
def _fc_loop(x, w, b, out, flatten, trans_w, ldw):  # pragma: no cover - compiled by numba
    k, n = w.shape
    m = x.size // k
    if x.ndim == 0 or x.size != m * k or out.size != m * n or (not flatten and x.shape[-1] != k):
        return False
    if m == 0:
        return True
    of, bf = out.reshape(-1), b.reshape(-1)
    beta = np.float32(0)
    if bf.size == of.size:  # a bias expanded to the output's shape (XNNPACK plans)
        for i in range(of.size):
            of[i] = bf[i]
        beta = np.float32(1)
    elif bf.size == n:
        for r in range(m):
            for j in range(n):
                of[r * n + j] = bf[j]
        beta = np.float32(1)
    _SGEMM(_ROW_MAJOR, _NO_TRANS, _TRANS if trans_w else _NO_TRANS, m, n, k, np.float32(1),
           x.ctypes.data, k, w.ctypes.data, ldw, beta, out.ctypes.data, n)
    return True


@accel.jit(error_model="numpy", before_load=_bind)  # (cached code calls the symbol)
def _fc_strided(x, w, b, out, trans_w, ldw):  # pragma: no cover - compiled by numba
    """``out[i, j] = x[i, j] @ w + b`` for 3-D ``x``, ``out`` of any positive strides with
    unit steps along their last axis: one GEMM per index of one leading axis, the other
    leading axis the GEMM's rows (its stride the leading dimension)."""
    k, n = w.shape
    p, q = x.shape[0], x.shape[1]
    if x.shape[2] != k or out.shape[0] != p or out.shape[1] != q or out.shape[2] != n or \
            x.strides[2] != 4 or out.strides[2] != 4 or (x.strides[0] | x.strides[1] |
                                                         out.strides[0] | out.strides[1]) % 4:
        return False
    if out.size == 0:
        return True
    xs0, xs1, os0, os1 = x.strides[0] // 4, x.strides[1] // 4, out.strides[0] // 4, \
        out.strides[1] // 4
    # out's elements must be distinct: its leading axes, by stride, each step past the last
    (sa, na), (sb, nb) = ((os0, p), (os1, q)) if os0 <= os1 else ((os1, q), (os0, p))
    span = n
    if na > 1:
        if sa < span:
            return False
        span = sa * na
    if nb > 1 and sb < span:
        return False
    rows1 = q == 1 or (xs1 >= k and os1 >= n)  # rows along axis 1, one GEMM per i
    rows0 = p == 1 or (xs0 >= k and os0 >= n)
    if rows1 and (q >= p or not rows0) and (p == 1 or (xs0 > 0 and os0 > 0)):
        m, calls, xl, ol, xstep, ostep = q, p, max(xs1, k), max(os1, n), xs0, os0
    elif rows0 and (q == 1 or (xs1 > 0 and os1 > 0)):
        m, calls, xl, ol, xstep, ostep = p, q, max(xs0, k), max(os0, n), xs1, os1
    else:
        return False
    beta = np.float32(0)
    if b.size == n or b.size == out.size:  # a row, or expanded to out's shape (C order)
        bf = b.reshape(-1)
        expanded = b.size != n
        for i in range(p):
            for j in range(q):
                at = (i * q + j) * n if expanded else 0
                for c in range(n):
                    out[i, j, c] = bf[at + c]
        beta = np.float32(1)
    elif b.size != 0:
        return False
    xa, oa = x.ctypes.data, out.ctypes.data
    for c in range(calls):
        _SGEMM(_ROW_MAJOR, _NO_TRANS, _TRANS if trans_w else _NO_TRANS, m, n, k, np.float32(1),
               xa + np.uintp(c * xstep * 4), xl, w.ctypes.data, ldw, beta,
               oa + np.uintp(c * ostep * 4), ol)
    return True


@accel.jit(error_model="numpy", before_load=_bind)  # (cached code calls the symbol)
def _q8_fc_loop(x, x_zp, w, b, scale, out_zp, lo, hi, xc, acc, out):  # pragma: no cover
    """int8 ``x`` [M, K] (zero point ``x_zp``) by float32 centered integer weights ``w``
    [K, N] plus the float32 integer bias ``b`` [N] -> int8 ``out`` [M, N]: the centered input
    into ``xc``, the bias into ``acc``, one GEMM adding the product (``beta = 1``), then the
    requantization ``rint(clamp(acc * scale, lo, hi)) + out_zp`` (``lo``/``hi`` already less
    the zero point). Exact integers throughout (the caller checked the float32 bound, bias
    included), so the sums are those of the NumPy path in any order: the same bytes."""
    m, k = x.shape
    n = w.shape[1]
    if m == 0:
        return
    for i in range(m):
        for j in range(k):
            xc[i, j] = np.float32(x[i, j]) - x_zp
        for j in range(n):
            acc[i, j] = b[j]
    _SGEMM(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, np.float32(1), xc.ctypes.data, k,
           w.ctypes.data, n, np.float32(1), acc.ctypes.data, n)
    for i in range(m):
        for j in range(n):
            v = acc[i, j] * scale[j]
            out[i, j] = np.int8(np.rint(min(max(v, lo), hi)) + out_zp)


@accel.jit(error_model="numpy", before_load=_bind)  # (cached code calls the symbol)
def _q8_conv_loop(x, x_zp, w, b, scale, out_zp, lo, hi, cols, acc, out, kh, kw, sh, sw, dh,
                  dw, pt, pl, rows):  # pragma: no cover - compiled
    """An int8 NHWC convolution (one group) as :func:`_q8_fc_loop` of its patch matrix, in
    blocks of ``rows`` output rows: each block's centered patches (the filter's (kh, kw, c)
    column order; taps in the padding are 0, as XNNPACK pads with the zero point) into
    ``cols``, the bias into ``acc``, one GEMM, the requantization into ``out`` [N, OH, OW,
    O]. The values and exact sums of the NumPy path (centered padded input, im2col, GEMM):
    the same bytes."""
    nb, h, wd, c = x.shape
    oh, ow, o = out.shape[1], out.shape[2], out.shape[3]
    k = kh * kw * c
    for n in range(nb):
        for r0 in range(0, oh, rows):
            r = min(rows, oh - r0)
            m = r * ow
            for ry in range(r):
                oy = r0 + ry
                for ox in range(ow):
                    row = ry * ow + ox
                    for i in range(kh):
                        iy = oy * sh - pt + i * dh
                        for j in range(kw):
                            ix = ox * sw - pl + j * dw
                            at = (i * kw + j) * c
                            if iy < 0 or iy >= h or ix < 0 or ix >= wd:
                                for ch in range(c):
                                    cols[row, at + ch] = np.float32(0)
                            else:
                                for ch in range(c):
                                    cols[row, at + ch] = np.float32(x[n, iy, ix, ch]) - x_zp
                    for q in range(o):
                        acc[row, q] = b[q]
            _SGEMM(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, o, k, np.float32(1), cols.ctypes.data,
                   k, w.ctypes.data, o, np.float32(1), acc.ctypes.data, o)
            for ry in range(r):
                for ox in range(ow):
                    row = ry * ow + ox
                    for q in range(o):
                        v = acc[row, q] * scale[q]
                        out[n, r0 + ry, ox, q] = np.int8(np.rint(min(max(v, lo), hi)) + out_zp)


def q8_conv(x: np.ndarray, x_zp: np.float32, w: np.ndarray, b: np.ndarray, scale: np.ndarray,
            out_zp: np.float32, lo: np.float32, hi: np.float32, cols: np.ndarray,
            acc: np.ndarray, out: np.ndarray, window: tuple[int, ...], rows: int) -> None:
    """:func:`_q8_conv_loop` (:func:`ready` first): ``window`` = (kh, kw, sh, sw, dh, dw,
    pad top, pad left); ``cols`` [rows * OW, KH*KW*C] and ``acc`` [rows * OW, O] C-contiguous
    float32, ``w`` [KH*KW*C, O] C-contiguous, ``out`` int8 [N, OH, OW, O]."""
    _q8_conv(x, x_zp, w, b, scale, out_zp, lo, hi, cols, acc, out, *window, rows)


def q8_fc(x: np.ndarray, x_zp: np.float32, w: np.ndarray, b: np.ndarray, scale: np.ndarray,
          out_zp: np.float32, lo: np.float32, hi: np.float32, xc: np.ndarray, acc: np.ndarray,
          out: np.ndarray) -> None:
    """:func:`_q8_fc_loop` (:func:`ready` first): C-contiguous 2-D arrays of the shapes it
    names, ``b`` and ``scale`` C-contiguous float32 of N values, the scalars float32."""
    _q8(x, x_zp, w, b, scale, out_zp, lo, hi, xc, acc, out)


def weights_layout(w: np.ndarray, b: np.ndarray | None) -> tuple[bool, int] | None:
    """``(transposed, leading dimension)`` of a float32 ``[K, N]`` weight matrix the
    compiled call reads as it is (C- or Fortran-contiguous), with a float32 bias of ``N``
    values or None; None otherwise. Pure NumPy: callers ask at load, :func:`ready` at run."""
    if w.dtype != F32 or w.ndim != 2 or w.size == 0:
        return None
    if b is not None and (b.dtype != F32 or b.size != w.shape[1] or not b.flags.c_contiguous):
        return None
    if w.flags.c_contiguous:
        return False, w.shape[1]
    if w.flags.f_contiguous:
        return True, w.shape[0]
    return None


def run(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray, flatten: bool,
        layout: tuple[bool, int]) -> bool:
    """``out = x @ w + b`` as one compiled call (:func:`ready` first): ``x`` float32
    ``[..., K]`` (any shape of ``m * K`` values when ``flatten``), ``w`` ``[K, N]`` of
    ``layout`` (:func:`weights_layout`), ``b`` of ``N`` values, of ``out.size`` values, or
    empty (no bias), ``out`` float32 of ``m * N`` values, not overlapping ``x``.

    A strided 2-D or 3-D ``x`` or ``out`` (a transposed view: attention's ``[S, B, E]``
    input) is multiplied in place, one GEMM per index of a leading axis (NumPy's matmul
    makes one small GEMM per row pair there, ~10x slower). False, having done nothing,
    when they do not fit (the sizes disagree, a stride along the last axis, overlapping
    rows)."""
    if x.flags.c_contiguous and out.flags.c_contiguous:
        return _loop(x, w, b, out, flatten, layout[0], layout[1])
    if flatten or x.ndim not in (2, 3) or out.ndim != x.ndim:
        return False
    if x.ndim == 2:
        x, out = x[None], out[None]
    return _strided(x, w, b, out, layout[0], layout[1])
