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
    """The bound GEMM against np.matmul on a small product (both weight layouts, bias)."""
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
    return True


def ready() -> bool:
    """True when :func:`run` may be called: numba, and NumPy's OpenBLAS bound and checked."""
    state = _state
    if state is None:
        state = _initialise()
    return state and accel.available()


def _initialise() -> bool:
    global _state, _loop
    if not accel.available():  # (decided when compiled kernels are on: asked again later)
        return False
    with _lock:
        if _state is None:
            ok = _bind()
            if ok:
                _loop = _fc_loop.compiled()
                ok = _self_check()
            _state = ok
    return _state


@accel.jit(error_model="numpy")
def _fc_loop(x, w, b, out, flatten, trans_w, ldw):  # pragma: no cover - compiled by numba
    k, n = w.shape
    m = x.size // k
    if not (x.flags.c_contiguous and out.flags.c_contiguous) or x.ndim == 0 or \
            x.size != m * k or out.size != m * n or (not flatten and x.shape[-1] != k):
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
    empty (no bias), ``out`` float32 of ``m * N`` values, not overlapping ``x``. False, having
    done nothing, when ``x`` or ``out`` is not C-contiguous or the sizes disagree."""
    return _loop(x, w, b, out, flatten, layout[0], layout[1])
