"""Indexing kernels: embedding, index_select, index, gather, scatter, index_put, masked ops,
repeat_interleave."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import BOOL, INT64, finish, invalid, is_bool, is_float, scalar, wrap_dim


def _check_bounds(index: np.ndarray, n: int, op: str) -> None:
    if index.size and (index.min() < 0 or index.max() >= n):
        raise invalid(f"{op}: index out of range for a dimension of size {n} "
                      f"(indices span {int(index.min())}..{int(index.max())})")


def _int_index(index: np.ndarray, op: str) -> np.ndarray:
    if is_float(index.dtype) or is_bool(index.dtype):
        raise invalid(f"{op}: index must be an integer tensor, got {index.dtype}")
    return index.astype(INT64, copy=False)


@kernel("aten::embedding.out")
def embedding_out(weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    idx = _int_index(indices, "embedding")
    n = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise invalid(f"embedding: index out of range for a table of {n} rows")
    return finish(np.take(weight, idx, axis=0), out)


@kernel("aten::index_select.out")
def index_select_out(self, dim, index, out):
    idx = _int_index(index, "index_select").reshape(-1)
    if index.ndim > 1:
        raise invalid("index_select: index must be 0-D or 1-D")
    if self.ndim == 0:
        wrap_dim(dim, 0)
        _check_bounds(idx, 1, "index_select")
        return finish(self, out)
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise invalid(f"index_select: index out of range for dimension {dim} of size {n}")
    return finish(np.take(self, idx, axis=d), out)


def _index_key(x: np.ndarray, indices, op: str, *, bool_as_ints: bool = False) -> tuple:
    if len(indices) > x.ndim:
        raise invalid(f"{op}: too many indices ({len(indices)}) for a tensor of rank {x.ndim}")
    key: list = []
    for i in indices:
        if i is None:
            key.append(slice(None))
        elif is_bool(i.dtype) or i.dtype == np.uint8:
            m = i.astype(BOOL, copy=False)
            key.extend(np.nonzero(m)) if bool_as_ints else key.append(m)
        elif is_float(i.dtype):
            raise invalid(f"{op}: tensors used as indices must be long, int, byte or bool")
        else:
            key.append(i.astype(INT64, copy=False))
    return tuple(key)


@kernel("aten::index.Tensor_out")
def index_tensor_out(self, indices, out):
    try:
        return finish(self[_index_key(self, indices, "index")], out)
    except IndexError as e:
        raise invalid(f"index: {e}") from None


@kernel("aten::index_put.out")
def index_put_out(self, indices, values, accumulate, out):
    return finish(_index_put(self.copy(), indices, values, accumulate), out)


@kernel("aten::index_put_")
def index_put_(self, indices, values, accumulate):
    """In place: writes into ``self`` and returns it."""
    return _index_put(self, indices, values, accumulate)


def _index_put(r, indices, values, accumulate):
    key = _index_key(r, indices, "index_put", bool_as_ints=True)
    try:
        if accumulate:
            np.add.at(r, key, values.astype(r.dtype, copy=False))
        else:
            r[key] = values
    except (IndexError, ValueError) as e:
        raise invalid(f"index_put: {e}") from None
    return r


def _gather_like(self, dim, index, op):
    idx = _int_index(index, op)
    if self.ndim == 0 or idx.ndim == 0:
        if self.ndim > 1 or idx.ndim > 1:
            raise invalid(f"{op}: index and self must have the same number of dimensions")
        wrap_dim(dim, 0)
        return self.reshape(-1), idx.reshape(-1), 0, True
    if idx.ndim != self.ndim:
        raise invalid(f"{op}: index {list(index.shape)} and self {list(self.shape)} must have "
                      "the same number of dimensions")
    d = wrap_dim(dim, self.ndim)
    return self, idx, d, False


@kernel("aten::gather.out")
def gather_out(self, dim, index, sparse_grad, out):
    x, idx, d, flat = _gather_like(self, dim, index, "gather")
    _check_bounds(idx, x.shape[d], "gather")
    if any(idx.shape[i] > x.shape[i] for i in range(x.ndim) if i != d):
        raise invalid(f"gather: index {list(index.shape)} is larger than self "
                      f"{list(self.shape)} outside dimension {dim}")
    src = x[tuple(slice(0, idx.shape[i]) if i != d else slice(None) for i in range(x.ndim))]
    r = np.take_along_axis(src, idx, axis=d)
    return finish(r.reshape(index.shape) if flat else r, out)


def _scatter_key(x, idx, d):
    key = list(np.indices(idx.shape, sparse=True))
    key[d] = idx
    return tuple(key)


def _scatter(self, dim, index, src, op, add):
    x, idx, d, _ = _gather_like(self, dim, index, op)
    _check_bounds(idx, x.shape[d], op)
    r = x.copy()
    key = _scatter_key(r, idx, d)
    if isinstance(src, np.ndarray):
        s = src.reshape((1,) * idx.ndim) if src.ndim < idx.ndim else src
        if any(s.shape[i] < n for i, n in enumerate(idx.shape)):
            raise invalid(f"{op}: src {list(src.shape)} is smaller than index "
                          f"{list(index.shape)}")
        s = s[tuple(slice(0, n) for n in idx.shape)].astype(r.dtype, copy=False)
    else:
        s = scalar(src, r.dtype)
    if add:
        np.add.at(r, key, np.broadcast_to(s, idx.shape))
    else:
        r[key] = s
    return r.reshape(self.shape)


@kernel("aten::scatter.src_out")
def scatter_src_out(self, dim, index, src, out):
    return finish(_scatter(self, dim, index, src, "scatter", False), out)


@kernel("aten::scatter.value_out")
def scatter_value_out(self, dim, index, value, out):
    return finish(_scatter(self, dim, index, value, "scatter", False), out)


@kernel("aten::scatter_add.out")
def scatter_add_out(self, dim, index, src, out):
    return finish(_scatter(self, dim, index, src, "scatter_add", True), out)


@kernel("aten::masked_fill.Scalar_out")
def masked_fill_scalar_out(self, mask, value, out):
    if not (is_bool(mask.dtype) or mask.dtype == np.uint8):
        raise invalid(f"masked_fill: mask must be a bool tensor, got {mask.dtype}")
    return finish(np.where(mask.astype(BOOL, copy=False), scalar(value, self.dtype), self), out)


@kernel("aten::masked_select.out")
def masked_select_out(self, mask, out):
    x, m = np.broadcast_arrays(self, mask.astype(BOOL, copy=False))
    return finish(x[m], out)


@kernel("aten::nonzero.out")
def nonzero_out(self, out):
    return finish(np.argwhere(self).astype(INT64, copy=False), out)


@kernel("aten::masked_scatter.out")
def masked_scatter_out(self, mask, source, out):
    """Copy consecutive elements of ``source`` into the positions where ``mask`` (broadcast
    with ``self``) is True, in row-major order."""
    if not (is_bool(mask.dtype) or mask.dtype == np.uint8):
        raise invalid(f"masked_scatter: mask must be a bool tensor, got {mask.dtype}")
    shape = np.broadcast_shapes(self.shape, mask.shape)
    m = np.broadcast_to(mask.astype(BOOL, copy=False), shape)
    n = int(np.count_nonzero(m))
    if n > source.size:
        raise invalid(f"masked_scatter: mask selects {n} elements but source has {source.size}")
    r = np.array(np.broadcast_to(self, shape))
    r[m] = source.reshape(-1)[:n]
    return finish(r, out)


@kernel("aten::repeat_interleave.Tensor_out")
def repeat_interleave_tensor_out(repeats, output_size, out):
    """``[0] * repeats[0] + [1] * repeats[1] + ...``: the index form of repeat_interleave."""
    if repeats.ndim != 1 or is_float(repeats.dtype) or is_bool(repeats.dtype):
        raise invalid(f"repeat_interleave: repeats must be a 1-D integer tensor, got "
                      f"{repeats.dtype}{list(repeats.shape)}")
    reps = repeats.astype(INT64, copy=False)
    if reps.size and reps.min() < 0:
        raise invalid("repeat_interleave: repeats cannot be negative")
    r = np.repeat(np.arange(reps.size, dtype=INT64), reps)
    if output_size is not None and output_size != r.size:
        raise invalid(f"repeat_interleave: output_size {output_size} does not match the sum of "
                      f"repeats {r.size}")
    return finish(r, out)
