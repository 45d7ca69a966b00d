"""GELU (erf form) compiled with numba (the optional ``accel`` extra, ``kernels.accel``).

The portable ``gelu.out`` kernel (``elementwise.gelu_out``) evaluates erf from a table of
Taylor expansions (``elementwise.erf``): a dozen float64 passes with gathers and temporaries,
~150 us for the 4096 values of a BERT feed-forward layer. This loop does the kernel's very
operations element by element (the same table, centre, Horner order, float64 then float32
rounding; numba compiles without fast-math, so no fused multiply-add), hence its bits, in a
few microseconds. Callers check ``accel.available()`` and otherwise run the kernel.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from .. import accel


@accel.jit
def _gelu_erf(x, coef, centres, inv_sqrt2, out):  # pragma: no cover - compiled
    """``out = (x * 0.5) * (1 + erf(x * inv_sqrt2))`` over flat float32 arrays, erf in
    float64 from ``coef[j, k]`` (degree j at centre k = rint(8 |v|) for |v| < 6)."""
    deg = coef.shape[0] - 1
    last = centres.size - 1
    half, one = np.float32(0.5), np.float32(1.0)
    for i in range(x.size):
        v = x[i] * inv_sqrt2  # float32, as the kernel's x * (1 / sqrt 2)
        a = abs(np.float64(v))
        if np.isnan(a):
            e = a
        elif a >= 6.0:
            e = 1.0
        else:
            k = min(int(np.rint(a * 8.0)), last)
            d = a - centres[k]
            r = coef[deg, k]
            for j in range(deg - 1, -1, -1):
                r = r * d + coef[j, k]
            e = r
        out[i] = (x[i] * half) * (one + np.float32(math.copysign(e, v)))


def gelu_step(x: np.ndarray, out: np.ndarray):
    """The step computing ``gelu(x, approximate='none')`` into ``out`` (float32, contiguous,
    same shape, apart), or None when the loop does not apply."""
    from .elementwise import _ERF_CENTRES, _erf_table

    f32 = np.dtype(np.float32)
    if not (accel.available() and x.dtype == f32 and out.dtype == f32 and x.shape == out.shape
            and x.flags.c_contiguous and out.flags.c_contiguous
            and not np.may_share_memory(x, out)):
        return None
    coef = np.ascontiguousarray(_erf_table(7))  # the kernel's float32 table (precise=False)
    args = (x.reshape(-1), coef, _ERF_CENTRES, np.float32(1 / math.sqrt(2.0)), out.reshape(-1))
    return partial(_run, args)


def _run(args) -> None:
    _gelu_erf.compiled()(*args)


# ---- sigmoid: the kernel's exp(-|x|) form, two compiled passes around NumPy's exp ----------


@accel.jit
def _neg_abs(x, e):  # pragma: no cover - compiled
    for i in range(x.size):
        e[i] = -abs(x[i])


@accel.jit(error_model="numpy")
def _sigmoid_finish(x, e, one, out):  # pragma: no cover - compiled
    """``1 / (1 + e)`` where x >= 0, ``e / (1 + e)`` elsewhere (NaN included)."""
    for i in range(x.size):
        p = one + e[i]
        out[i] = one / p if x[i] >= 0 else e[i] / p


@accel.jit(error_model="numpy")
def _sigmoid_finish_in_place(x, e, one):  # pragma: no cover - compiled
    """:func:`_sigmoid_finish` with ``out`` = ``e``, same bits. Its own loop: with one array
    read and written through two arguments numba's loop stays scalar (2,816 values: 3.7 us
    there, 1.1 us here)."""
    for i in range(x.size):
        p = one + e[i]
        e[i] = one / p if x[i] >= 0 else e[i] / p


def sigmoid_steps(x: np.ndarray, out: np.ndarray) -> list | None:
    """Three steps for the prepared sigmoid (instead of eight NumPy calls), its bits: the exp
    stays NumPy's (numba's may round differently). None when the loops do not apply."""
    if not accel.available() or x.ndim == 0:
        return None
    xf, of = x.reshape(-1), out.reshape(-1)
    e = np.empty(xf.shape, x.dtype)
    return [partial(_run_loop, _neg_abs, (xf, e)), partial(np.exp, e, out=e),
            partial(_run_loop, _sigmoid_finish, (xf, e, x.dtype.type(1), of))]


def sigmoid_into(x: np.ndarray, out: np.ndarray) -> None:
    """The three steps on flat C-contiguous ``x`` and ``out`` (``out`` holds ``exp(-|x|)``
    in between: each value is read where it is written), numba available."""
    _neg_abs.compiled()(x, out)
    np.exp(out, out=out)
    _sigmoid_finish_in_place.compiled()(x, out, x.dtype.type(1))


def _run_loop(loop, args) -> None:
    loop.compiled()(*args)
