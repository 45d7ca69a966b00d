"""Shape and copy kernels: the ``*_copy`` view ops ExecuTorch emits, cat/stack/split, casts."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import check_result_fits, finish, invalid, wrap_dim


def _index(index: int, n: int, what: str) -> int:
    if not -n <= index < n:
        raise invalid(f"{what}: index {index} is out of range for a dimension of size {n}")
    return index % n


def _dims(dims, ndim: int) -> list[int]:
    out = [wrap_dim(d, ndim) for d in dims]
    if len(set(out)) != len(out):
        raise invalid(f"dims {list(dims)} repeat a dimension")
    return out


# ---- copies and casts ------------------------------------------------------------------


@kernel("aten::clone.out")
def clone_out(self, memory_format, out):
    return finish(self, out)


@kernel("aten::alias_copy.out", "aten::detach_copy.out", "aten::lift_fresh_copy.out")
def alias_copy_out(self, out):
    return finish(self, out)


@kernel("aten::_to_copy.out")
def to_copy_out(self, non_blocking, memory_format, out):
    return finish(self, out, convert=True)  # the cast to out.dtype happens on the way in


@kernel("aten::copy.out")
def copy_out(self, src, non_blocking, out):
    try:
        return finish(np.broadcast_to(src, self.shape), out, convert=True)
    except ValueError:
        raise invalid(f"copy: src of shape {list(src.shape)} does not broadcast to "
                      f"{list(self.shape)}") from None


# ---- views as copies -------------------------------------------------------------------


@kernel("aten::view_copy.out")
def view_copy_out(self, size, out):
    try:
        return finish(self.reshape(size), out)
    except ValueError:
        raise invalid(f"view: shape {list(size)} is invalid for input of shape "
                      f"{list(self.shape)}") from None


@kernel("aten::permute_copy.out")
def permute_copy_out(self, dims, out):
    if len(dims) != self.ndim:
        raise invalid(f"permute: {list(dims)} does not name the {self.ndim} dims of the input")
    return finish(np.transpose(self, _dims(dims, self.ndim)), out)


@kernel("aten::expand_copy.out")
def expand_copy_out(self, size, implicit, out):
    lead = len(size) - self.ndim
    if lead < 0:
        raise invalid(f"expand: size {list(size)} has fewer dims than the input {self.shape}")
    shape = []
    for i, s in enumerate(size):
        if s == -1:
            if i < lead:
                raise invalid(f"expand: -1 is not allowed in a new leading dim ({list(size)})")
            s = self.shape[i - lead]
        shape.append(s)
    check_result_fits(shape, out, "expand_copy")
    try:
        return finish(np.broadcast_to(self, shape), out)
    except ValueError:
        raise invalid(f"expand: cannot expand shape {list(self.shape)} to {list(size)}") from None


@kernel("aten::t_copy.out")
def t_copy_out(self, out):
    if self.ndim > 2:
        raise invalid(f"t() expects a tensor with <= 2 dims, got {self.ndim}")
    return finish(self.T, out)


@kernel("aten::transpose_copy.int_out")
def transpose_copy_int_out(self, dim0, dim1, out):
    if self.ndim == 0:
        for d in (dim0, dim1):
            wrap_dim(d, 0)  # validates
        return finish(self, out)
    return finish(np.swapaxes(self, wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim)), out)


@kernel("aten::unsqueeze_copy.out")
def unsqueeze_copy_out(self, dim, out):
    return finish(np.expand_dims(self, wrap_dim(dim, self.ndim + 1)), out)


def _squeeze(x, dims):
    axes = tuple(d for d in _dims(dims, x.ndim) if x.ndim and x.shape[d] == 1)
    return np.squeeze(x, axis=axes) if axes else x


@kernel("aten::squeeze_copy.dim_out")
def squeeze_copy_dim_out(self, dim, out):
    return finish(_squeeze(self, [dim]), out)


@kernel("aten::squeeze_copy.dims_out")
def squeeze_copy_dims_out(self, dim, out):
    return finish(_squeeze(self, dim), out)


@kernel("aten::squeeze_copy.out")
def squeeze_copy_out(self, out):
    return finish(np.squeeze(self), out)


@kernel("aten::slice_copy.Tensor_out")
def slice_copy_tensor_out(self, dim, start, end, step, out):
    if self.ndim == 0:
        raise invalid("slice() cannot be applied to a 0-dim tensor")
    if step <= 0:
        raise invalid(f"slice step must be positive, got {step}")
    d = wrap_dim(dim, self.ndim)
    sl = [slice(None)] * self.ndim
    sl[d] = slice(start, end, step)
    return finish(self[tuple(sl)], out)


@kernel("aten::select_copy.int_out")
def select_copy_int_out(self, dim, index, out):
    if self.ndim == 0:
        raise invalid("select() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    return finish(np.take(self, _index(index, self.shape[d], "select"), axis=d), out)


@kernel("aten::narrow_copy.out")
def narrow_copy_out(self, dim, start, length, out):
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length <= n - start):
        raise invalid(f"narrow: start {start} + length {length} exceeds dimension size {n}")
    sl = [slice(None)] * self.ndim
    sl[d] = slice(start, start + length)
    return finish(self[tuple(sl)], out)


@kernel("aten::diagonal_copy.out")
def diagonal_copy_out(self, offset, dim1, dim2, out):
    d1, d2 = wrap_dim(dim1, self.ndim), wrap_dim(dim2, self.ndim)
    if d1 == d2:
        raise invalid("diagonal dimensions cannot be identical")
    return finish(np.diagonal(self, offset, d1, d2), out)


# ---- joining and splitting -------------------------------------------------------------


@kernel("aten::cat.out")
def cat_out(tensors, dim, out):
    # torch skips legacy empty 1-D tensors (shape [0]) whatever the other shapes are
    ts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not ts:
        return finish(np.zeros((0,), out.dtype), out)
    if any(t.ndim == 0 for t in ts):
        raise invalid("cat: zero-dimensional tensors cannot be concatenated")
    d = wrap_dim(dim, ts[0].ndim)
    try:
        r = np.concatenate(ts, axis=d, dtype=out.dtype, casting="unsafe")
    except ValueError as e:
        raise invalid(f"cat: {e}") from None
    return finish(r, out)


@kernel("aten::stack.out")
def stack_out(tensors, dim, out):
    if not tensors:
        raise invalid("stack expects a non-empty list of tensors")
    d = wrap_dim(dim, tensors[0].ndim + 1)
    try:
        r = np.stack(tensors, axis=d, dtype=out.dtype, casting="unsafe")
    except ValueError as e:
        raise invalid(f"stack: {e}") from None
    return finish(r, out)


def _split_outputs(parts, out, op):
    if len(parts) != len(out):
        raise invalid(f"{op}: produces {len(parts)} tensors but the program gave {len(out)} "
                      "outputs")
    return tuple(finish(p, o) for p, o in zip(parts, out))


@kernel("aten::split_with_sizes_copy.out")
def split_with_sizes_copy_out(self, split_sizes, dim, out):
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0 or sum(split_sizes) != self.shape[d] or min(split_sizes, default=0) < 0:
        raise invalid(f"split_with_sizes: sizes {list(split_sizes)} do not add up to the "
                      f"size of dim {dim} of shape {list(self.shape)}")
    bounds = np.cumsum(split_sizes)[:-1]
    return _split_outputs(np.split(self, bounds, axis=d), out, "split_with_sizes")


@kernel("aten::split_copy.Tensor_out")
def split_copy_tensor_out(self, split_size, dim, out):
    if self.ndim == 0:
        raise invalid("split: cannot split a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    if split_size < 0 or (split_size == 0 and n != 0):
        raise invalid(f"split: split_size {split_size} is invalid for a dim of size {n}")
    bounds = list(range(split_size, n, split_size)) if split_size else []
    return _split_outputs(np.split(self, bounds, axis=d), out, "split")


@kernel("aten::unbind_copy.int_out")
def unbind_copy_int_out(self, dim, out):
    if self.ndim == 0:
        raise invalid("unbind: cannot unbind a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    parts = [np.take(self, i, axis=d) for i in range(self.shape[d])]
    return _split_outputs(parts, out, "unbind")


# ---- rearrangements --------------------------------------------------------------------


@kernel("aten::flip.out")
def flip_out(self, dims, out):
    axes = tuple(_dims(dims, self.ndim)) if self.ndim else ()
    return finish(np.flip(self, axis=axes) if axes else self, out)


@kernel("aten::roll.out")
def roll_out(self, shifts, dims, out):
    if len(dims) == 0:
        if len(shifts) != 1:
            raise invalid("roll: without dims, shifts must have exactly one element")
        return finish(np.roll(self.reshape(-1), shifts[0]).reshape(self.shape), out)
    if len(shifts) != len(dims):
        raise invalid(f"roll: shifts {list(shifts)} and dims {list(dims)} differ in length")
    if self.ndim == 0:
        return finish(self, out)
    return finish(np.roll(self, list(shifts), axis=[wrap_dim(d, self.ndim) for d in dims]), out)


@kernel("aten::repeat.out")
def repeat_out(self, repeats, out):
    lead = len(repeats) - self.ndim
    if lead < 0:
        raise invalid(f"repeat: {list(repeats)} has fewer dims than the input {self.shape}")
    if any(r < 0 for r in repeats):
        raise invalid(f"repeat: negative repeat count in {list(repeats)}")
    src = (1,) * lead + self.shape
    check_result_fits([r * d for r, d in zip(repeats, src)], out, "repeat")
    return finish(np.tile(self.reshape((1,) * lead + self.shape), repeats), out)


@kernel("aten::tril.out")
def tril_out(self, diagonal, out):
    if self.ndim < 2:
        raise invalid("tril: input must have at least 2 dims")
    return finish(np.tril(self, diagonal), out)


@kernel("aten::triu.out")
def triu_out(self, diagonal, out):
    if self.ndim < 2:
        raise invalid("triu: input must have at least 2 dims")
    return finish(np.triu(self, diagonal), out)


@kernel("aten::pixel_shuffle.out")
def pixel_shuffle_out(self, upscale_factor, out):
    r = upscale_factor
    if self.ndim < 3 or self.shape[-3] % (r * r):
        raise invalid(f"pixel_shuffle: channels of {list(self.shape)} not divisible by {r * r}")
    *b, c, h, w = self.shape
    x = self.reshape((*b, c // (r * r), r, r, h, w))
    n = len(b)
    x = x.transpose(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return finish(x.reshape((*b, c // (r * r), h * r, w * r)), out)


@kernel("aten::pixel_unshuffle.out")
def pixel_unshuffle_out(self, downscale_factor, out):
    r = downscale_factor
    if self.ndim < 3 or self.shape[-1] % r or self.shape[-2] % r:
        raise invalid(f"pixel_unshuffle: spatial dims of {list(self.shape)} not divisible by {r}")
    *b, c, h, w = self.shape
    x = self.reshape((*b, c, h // r, r, w // r, r))
    n = len(b)
    x = x.transpose(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return finish(x.reshape((*b, c * r * r, h // r, w // r)), out)


# ---- scatters into a copy --------------------------------------------------------------


@kernel("aten::select_scatter.out")
def select_scatter_out(self, src, dim, index, out):
    d = wrap_dim(dim, self.ndim)
    r = self.copy()
    sl = [slice(None)] * self.ndim
    sl[d] = _index(index, self.shape[d], "select_scatter")
    r[tuple(sl)] = src
    return finish(r, out)


@kernel("aten::slice_scatter.out")
def slice_scatter_out(self, src, dim, start, end, step, out):
    d = wrap_dim(dim, self.ndim)
    r = self.copy()
    sl = [slice(None)] * self.ndim
    sl[d] = slice(start, end, step)
    r[tuple(sl)] = src
    return finish(r, out)


# ---- strided views as copies -----------------------------------------------------------


@kernel("aten::as_strided_copy.out")
def as_strided_copy_out(self, size, stride, storage_offset, out):
    """A view of ``self``'s storage (its elements in memory order) with the given sizes and
    element strides, copied."""
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise invalid(f"as_strided: size {list(size)} and stride {list(stride)} must be "
                      "non-negative and of equal length")
    storage = np.ravel(self, order="K")
    offset = storage_offset or 0
    if 0 not in size:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if offset < 0 or last >= storage.size:
            raise invalid(f"as_strided: size {list(size)}, stride {list(stride)} and offset "
                          f"{offset} reach element {last} of a {storage.size}-element storage")
    else:
        offset = 0
    base = np.ascontiguousarray(storage[offset:]) if storage.size else storage
    r = np.lib.stride_tricks.as_strided(base, shape=tuple(size),
                                        strides=tuple(s * base.itemsize for s in stride))
    return finish(r.copy(), out)


@kernel("aten::unfold_copy.out")
def unfold_copy_out(self, dimension, size, step, out):
    """Windows of ``size`` every ``step`` along ``dimension``; the window is a new last dim."""
    x = self.reshape(1) if self.ndim == 0 else self
    d = wrap_dim(dimension, self.ndim)
    n = x.shape[d]
    if size > n or step <= 0 or size < 0:
        raise invalid(f"unfold: size {size} and step {step} do not fit dimension {dimension} "
                      f"of size {n}")
    w = np.lib.stride_tricks.sliding_window_view(x, size, axis=d)
    sl = [slice(None)] * w.ndim
    sl[d] = slice(None, None, step)
    r = w[tuple(sl)]
    return finish(r.reshape(size) if self.ndim == 0 else r, out)


@kernel("aten::view_as_real_copy.out")
def view_as_real_copy_out(self, out):
    """A complex tensor as (..., 2) real pairs."""
    if self.dtype.kind != "c":
        raise invalid(f"view_as_real is only supported for complex tensors, got {self.dtype}")
    return finish(np.stack([self.real, self.imag], axis=-1), out)


@kernel("et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out")
def host_device_copy_out(self, out):
    """ExecuTorch's host/device transfers: the runtime has host memory only, so a copy."""
    return finish(self, out)
