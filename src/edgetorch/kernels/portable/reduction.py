"""Reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, any, var/std, softmax, cumsum."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import (
    BOOL,
    FLOAT64,
    INT64,
    finish,
    float_compute,
    invalid,
    is_float,
    opmath,
    reduce_axes,
    scalar_type_arg,
    wrap_dim,
)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _sum_dtype(x: np.ndarray, dtype: int | None) -> np.ndarray:
    """torch's sum/prod/cumsum result dtype: ``dtype`` if given, int64 for integers/bools."""
    dt = scalar_type_arg(dtype)
    if dt is not None:
        return dt
    return x.dtype if is_float(x.dtype) else INT64


def _check_nonempty(x: np.ndarray, axes: tuple[int, ...], op: str) -> None:
    if any(x.shape[a] == 0 for a in axes) or (x.size == 0 and not axes and x.ndim == 0):
        raise invalid(f"{op}: cannot reduce over a zero-size dimension (shape {list(x.shape)})")


def _ordered_sum(x: np.ndarray, axes: tuple[int, ...], ct: np.dtype, keepdim: bool) -> np.ndarray:
    """Sum over ``axes`` adding the elements one after the other in index order, as
    ExecuTorch's portable ``mean`` does (checked bit for bit; ``sum`` uses the same reduction
    loop there). NumPy's pairwise summation rounds differently; the last bits matter downstream
    of dynamic quantization, where a value on a rounding boundary flips an int8 code (an 8da4w
    LLM's logits moved by ~1 between the two runtimes). Costs one input-sized temporary."""
    ct = np.dtype(ct)
    if ct.kind != "f" or not axes or x.size == 0:
        return np.sum(x, axis=axes, dtype=ct, keepdims=keepdim)
    keep = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, keep + list(axes))
    rows = moved.reshape(int(np.prod([x.shape[a] for a in keep], dtype=np.int64)), -1)
    total = np.add.accumulate(rows, axis=1, dtype=ct)[:, -1]
    shape = [1 if a in axes else n for a, n in enumerate(x.shape)] if keepdim else \
        [x.shape[a] for a in keep]
    return total.reshape(shape)


@kernel("aten::sum.IntList_out")
def sum_intlist_out(self, dim, keepdim, dtype, out):
    axes = reduce_axes(self.ndim, dim)
    dt = _sum_dtype(self, dtype)
    return finish(_ordered_sum(self, axes, opmath(dt), keepdim), out)


def _mean(x, axes, keepdim, dtype, out):
    dt = scalar_type_arg(dtype)
    dt = x.dtype if dt is None else dt
    if not is_float(dt):
        raise invalid(f"mean needs a floating point input or dtype, got {x.dtype}")
    ct = opmath(dt)
    s = _ordered_sum(x, axes, ct, keepdim)
    with np.errstate(all="ignore"):
        return finish(s / ct.type(_count(x.shape, axes)), out)


@kernel("aten::mean.out")
def mean_out(self, dim, keepdim, dtype, out):
    return _mean(self, reduce_axes(self.ndim, dim), keepdim, dtype, out)


@kernel("aten::mean.dtype_out")
def mean_dtype_out(self, dtype, out):
    return _mean(self, tuple(range(self.ndim)), False, dtype, out)


@kernel("aten::prod.int_out")
def prod_int_out(self, dim, keepdim, dtype, out):
    axes = (wrap_dim(dim, self.ndim),) if self.ndim else ()
    dt = _sum_dtype(self, dtype)
    with np.errstate(all="ignore"):
        return finish(np.prod(self, axis=axes, dtype=opmath(dt), keepdims=keepdim), out)


@kernel("aten::prod.out")
def prod_out(self, dtype, out):
    dt = _sum_dtype(self, dtype)
    with np.errstate(all="ignore"):
        return finish(np.prod(self, dtype=opmath(dt)), out)


def _minmax(x, dim, keepdim, fn, op):
    axes = reduce_axes(x.ndim, dim)
    _check_nonempty(x, axes, op)
    with np.errstate(invalid="ignore"):  # NaN propagates, as in torch
        return fn(x, axis=axes, keepdims=keepdim)


@kernel("aten::amax.out")
def amax_out(self, dim, keepdim, out):
    return finish(_minmax(self, dim, keepdim, np.amax, "amax"), out)


@kernel("aten::amin.out")
def amin_out(self, dim, keepdim, out):
    return finish(_minmax(self, dim, keepdim, np.amin, "amin"), out)


@kernel("aten::max.unary_out")
def max_unary_out(self, out):
    if self.size == 0:
        raise invalid("max() of an empty tensor has no identity; pass a dim")
    return finish(np.max(self), out)


@kernel("aten::min.unary_out")
def min_unary_out(self, out):
    if self.size == 0:
        raise invalid("min() of an empty tensor has no identity; pass a dim")
    return finish(np.min(self), out)


def _arg(x, dim, keepdim, fn, op):
    if dim is None:
        if x.size == 0:
            raise invalid(f"{op}: cannot reduce an empty tensor without a dim")
        r = np.asarray(fn(x.reshape(-1)), dtype=INT64)
        return r.reshape((1,) * x.ndim) if keepdim else r
    d = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return np.zeros((), INT64)
    _check_nonempty(x, (d,), op)
    return fn(x, axis=d, keepdims=keepdim).astype(INT64, copy=False)


@kernel("aten::argmax.out")
def argmax_out(self, dim, keepdim, out):
    return finish(_arg(self, dim, keepdim, np.argmax, "argmax"), out)


@kernel("aten::argmin.out")
def argmin_out(self, dim, keepdim, out):
    return finish(_arg(self, dim, keepdim, np.argmin, "argmin"), out)


def _dim_values_indices(x, dim, keepdim, argfn, op):
    d = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy(), np.zeros((), INT64)
    _check_nonempty(x, (d,), op)
    idx = argfn(x, axis=d, keepdims=True)
    vals = np.take_along_axis(x, idx, axis=d)
    if not keepdim:
        idx, vals = np.squeeze(idx, d), np.squeeze(vals, d)
    return vals, idx.astype(INT64, copy=False)


@kernel("aten::max.dim_max")
def max_dim_max(self, dim, keepdim, max, max_values):
    vals, idx = _dim_values_indices(self, dim, keepdim, np.argmax, "max")
    return finish(vals, max), finish(idx, max_values)


@kernel("aten::min.dim_min")
def min_dim_min(self, dim, keepdim, min, min_indices):
    vals, idx = _dim_values_indices(self, dim, keepdim, np.argmin, "min")
    return finish(vals, min), finish(idx, min_indices)


# ---- any -------------------------------------------------------------------------------


@kernel("aten::any.out")
def any_out(self, dim, keepdim, out):
    axes = reduce_axes(self.ndim, [dim])
    return finish(np.any(self.astype(BOOL, copy=False), axis=axes, keepdims=keepdim), out)


@kernel("aten::any.dims_out")
def any_dims_out(self, dim, keepdim, out):
    # Unlike sum, any(dim=[]) reduces nothing (only dim=None reduces everything).
    axes = reduce_axes(self.ndim, dim, empty_is_all=False)
    return finish(np.any(self.astype(BOOL, copy=False), axis=axes, keepdims=keepdim), out)


@kernel("aten::any.all_out")
def any_all_out(self, out):
    return finish(np.any(self.astype(BOOL, copy=False)), out)


# ---- variance --------------------------------------------------------------------------


def _var_mean(x, dim, correction, keepdim):
    axes = reduce_axes(x.ndim, dim)
    ct = float_compute(x.dtype)
    xc = x.astype(ct, copy=False)
    n = _count(x.shape, axes)
    corr = 1 if correction is None else correction
    with np.errstate(all="ignore"):
        mean = np.sum(xc, axis=axes, keepdims=True) / ct.type(n)
        d = xc - mean
        var = np.sum(d * d, axis=axes, keepdims=keepdim) / ct.type(max(0, n - corr))
    if not keepdim:
        mean = np.squeeze(mean, axes) if axes else mean
    return var, mean


@kernel("aten::var.correction_out")
def var_correction_out(self, dim, correction, keepdim, out):
    return finish(_var_mean(self, dim, correction, keepdim)[0], out)


@kernel("aten::var.out")
def var_out(self, dim, unbiased, keepdim, out):
    return finish(_var_mean(self, dim, 1 if unbiased else 0, keepdim)[0], out)


@kernel("aten::std.correction_out")
def std_correction_out(self, dim, correction, keepdim, out):
    with np.errstate(all="ignore"):
        return finish(np.sqrt(_var_mean(self, dim, correction, keepdim)[0]), out)


@kernel("aten::var_mean.correction_out")
def var_mean_correction_out(self, dim, correction, keepdim, out0, out1):
    var, mean = _var_mean(self, dim, correction, keepdim)
    return finish(var, out0), finish(mean, out1)


# ---- softmax, cumsum -------------------------------------------------------------------


def _softmax_input(x, dim):
    d = wrap_dim(dim, x.ndim)
    xc = x.astype(float_compute(x.dtype), copy=False)
    return (xc.reshape(1), 0) if x.ndim == 0 else (xc, d)


def _shifted(x, d):
    m = np.max(x, axis=d, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)  # all -inf rows give nan (as torch), not inf - inf
    return x - m


@kernel("aten::_softmax.out")
def softmax_out(self, dim, half_to_float, out):
    x, d = _softmax_input(self, dim)
    with np.errstate(all="ignore"):
        e = np.exp(_shifted(x, d))
        r = e / np.sum(e, axis=d, keepdims=True)
    return finish(r.reshape(self.shape), out)


@kernel("aten::_log_softmax.out")
def log_softmax_out(self, dim, half_to_float, out):
    x, d = _softmax_input(self, dim)
    with np.errstate(all="ignore"):
        s = _shifted(x, d)
        r = s - np.log(np.sum(np.exp(s), axis=d, keepdims=True))
    return finish(r.reshape(self.shape), out)


@kernel("aten::cumsum.out")
def cumsum_out(self, dim, dtype, out):
    d = wrap_dim(dim, self.ndim)
    dt = _sum_dtype(self, dtype)
    # torch's CPU cumsum accumulates floats in double (acc_type), so do we.
    acc = FLOAT64 if is_float(dt) else dt
    if self.ndim == 0:
        return finish(self.astype(dt), out)
    return finish(np.cumsum(self, axis=d, dtype=acc).astype(dt, copy=False), out)
