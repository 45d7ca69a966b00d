"""Embedding lookups compiled with numba (the optional ``accel`` extra, ``kernels.accel``).

The prepared ``embedding.out`` step checks its indices (data: on every call) with a NumPy
reduction and then gathers with ``np.take``: two calls of ~2 us each for the 32 tokens of a
small encoder. This loop checks and copies the rows in one call, the same values (a copy).
Callers check ``accel.available()`` and otherwise run the NumPy step.
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
