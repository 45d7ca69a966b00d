"""Embedding lookups and ``where`` compiled with numba (the optional ``accel`` extra,
``kernels.accel``).

The prepared ``embedding.out`` step checks its indices (data: on every call) with a NumPy
reduction and then gathers with ``np.take``: two calls of ~2 us each for the 32 tokens of a
small encoder. This loop checks and copies the rows in one call, the same values (a copy).
Callers check ``accel.available()`` and otherwise run the NumPy step.

``where`` (SDPA's masks) is two NumPy copies, the second masked (~3 us for 1,024 values);
the loop picks each value once, from arrays broadcast to the output's shape at load.
"""

from __future__ import annotations

import numpy as np

from .. import accel

# dtypes numba copies as they are (bfloat16 tables are uint16 views elsewhere: not here)
GATHER_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))


@accel.jit
def _gather_rows(weight, indices, out):  # pragma: no cover - compiled
    """``out[i] = weight[indices[i]]`` for flat int64 ``indices`` and 2-D ``out``; False,
    having written nothing, when an index is outside ``[0, rows)``."""
    rows = weight.shape[0]
    for i in range(indices.size):
        if indices[i] < 0 or indices[i] >= rows:
            return False
    for i in range(indices.size):
        out[i, :] = weight[indices[i]]
    return True


def gather_rows(weight: np.ndarray, indices: np.ndarray, out: np.ndarray) -> bool:
    """:func:`_gather_rows` on ``indices`` (any shape) and ``out`` viewed as rows."""
    return _gather_rows.compiled()(weight, indices.reshape(-1),
                                   out.reshape(indices.size, weight.shape[1]))


@accel.jit
def _select4(cond, a, b, out):  # pragma: no cover - compiled
    """``out = a where cond else b`` over 4-D arrays of ``out``'s shape (broadcast views)."""
    n0, n1, n2, n3 = out.shape
    for i in range(n0):
        for j in range(n1):
            for k in range(n2):
                for m in range(n3):
                    out[i, j, k, m] = a[i, j, k, m] if cond[i, j, k, m] else b[i, j, k, m]


def select_views(cond: np.ndarray, a: np.ndarray, b: np.ndarray,
                 out: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """The four arrays :func:`select` takes: the inputs broadcast to ``out``'s shape, all
    viewed as 4-D (no copy); None when ``out`` has more than four dimensions or is not
    C-contiguous."""
    if out.ndim > 4 or not out.flags.c_contiguous:
        return None
    shape4 = (1,) * (4 - out.ndim) + out.shape
    ins = tuple(np.broadcast_to(v, out.shape).reshape(shape4) for v in (cond, a, b))
    return (*ins, out.reshape(shape4))


def select(cond4: np.ndarray, a4: np.ndarray, b4: np.ndarray, out4: np.ndarray) -> None:
    """:func:`_select4` on the views of :func:`select_views`."""
    _select4.compiled()(cond4, a4, b4, out4)
