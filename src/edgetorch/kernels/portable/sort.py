"""Sorting: sort and topk along a dim, one stable argsort over the whole tensor.

torch orders NaN above every number (last ascending, first descending) and keeps equal
elements in input order when asked for a stable sort; a descending stable order is the
ascending stable order of the reversed axis, reversed back.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import INT64, finish, invalid, is_bool, opmath, wrap_dim


def _order(x: np.ndarray, d: int, descending: bool) -> np.ndarray:
    """Stable sorting permutation of ``x`` along axis ``d``."""
    if not descending:
        return np.argsort(x, axis=d, kind="stable")
    n = x.shape[d]
    return n - 1 - np.flip(np.argsort(np.flip(x, axis=d), axis=d, kind="stable"), axis=d)


def _sortable(x: np.ndarray) -> np.ndarray:
    """Keys NumPy sorts correctly: bfloat16 (whose NaNs break NumPy's sort) via float32."""
    if is_bool(x.dtype):
        return x.view(np.uint8)
    return x.astype(opmath(x.dtype), copy=False)


def _sort(self, dim, descending, values, indices):
    d = wrap_dim(dim, self.ndim)
    x = self.reshape(1) if self.ndim == 0 else self
    idx = _order(_sortable(x), d, descending)
    vals = np.take_along_axis(x, idx, axis=d).reshape(self.shape)
    return finish(vals, values), finish(idx.reshape(self.shape).astype(INT64, copy=False), indices)


@kernel("aten::sort.values")
def sort_values(self, dim, descending, values, indices):
    return _sort(self, dim, descending, values, indices)


@kernel("aten::sort.values_stable")
def sort_values_stable(self, stable, dim, descending, values, indices):
    return _sort(self, dim, descending, values, indices)  # always stable


@kernel("aten::topk.values")
def topk_values(self, k, dim, largest, sorted, values, indices):
    d = wrap_dim(dim, self.ndim)
    x = self.reshape(1) if self.ndim == 0 else self
    n = x.shape[d]
    if not 0 <= k <= n:
        raise invalid(f"topk: k={k} is out of range for dimension {dim} of size {n}")
    idx = np.take(_order(_sortable(x), d, largest), np.arange(k), axis=d)
    vals = np.take_along_axis(x, idx, axis=d)
    if self.ndim == 0:
        vals, idx = vals.reshape(()), idx.reshape(())
    return finish(vals, values), finish(idx.astype(INT64, copy=False), indices)
