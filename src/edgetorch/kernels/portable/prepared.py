"""Load-time preparers of the portable kernels that dominate small models' per-call cost.

A preparer (``registry.prepares``) gets an instruction's arguments once, at ``load_method``,
when every tensor among them keeps its memory and sizes across calls, and returns the NumPy
calls (``functools.partial`` with ``out=``) that compute exactly what the kernel computes:
the same ufuncs (or the kernel's own compiled call) on the same operands in the same order,
so results are bit-identical (tests compare each preparer with its kernel). It returns None, and the kernel runs as usual, for
anything off its narrow fast case: other dtypes, broadcasting into a different shape, ``alpha``
not 1, overlapping operands, a view NumPy would have to copy. Temporaries are allocated here,
once per instruction, never per call.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ...errors import KernelError
from .. import accel
from ..conv.nchw import conv_step
from ..registry import Copy, prepares
from . import index_accel, linalg, norm_accel, special_accel
from ._util import INT64, expand_param, invalid, scalar
from .pooling import _pool_params, pool_pads

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _float(*xs) -> bool:
    """All arrays of one float dtype that NumPy computes in directly (float32 or float64)."""
    if not all(type(x) is np.ndarray for x in xs):
        return False
    dt = xs[0].dtype
    return dt in _FLOATS and all(x.dtype == dt for x in xs)


def _apart(out: np.ndarray, *xs) -> bool:
    return not any(x is not None and np.may_share_memory(out, x) for x in xs)


def _fits(out: np.ndarray, *shapes) -> bool:
    try:
        return np.broadcast_shapes(*shapes) == out.shape
    except ValueError:
        return False


def _number(v) -> bool:
    return type(v) in (int, float)


# ---- matrix products -------------------------------------------------------------------


@prepares("aten::mm.out")
def _mm(a, b, out):
    if not (_float(a, b, out) and a.ndim == b.ndim == 2 and _apart(out, a, b)):
        return None
    if out.shape != (a.shape[0], b.shape[1]) or a.shape[1] != b.shape[0]:
        return None
    return [partial(np.matmul, a, b, out)]


@prepares("aten::bmm.out")
def _bmm(a, b, out):
    if not (_float(a, b, out) and a.ndim == b.ndim == 3 and _apart(out, a, b)):
        return None
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] or \
            out.shape != (a.shape[0], a.shape[1], b.shape[2]):
        return None
    return [partial(np.matmul, a, b, out)]


@prepares("aten::addmm.out")
def _addmm(c, a, b, beta, alpha, out):
    if not (_float(c, a, b, out) and a.ndim == b.ndim == 2 and _apart(out, a, b, c)):
        return None
    if alpha != 1 or beta not in (0, 1) or a.shape[1] != b.shape[0]:
        return None
    if out.shape != (a.shape[0], b.shape[1]) or not _fits(out, out.shape, c.shape):
        return None
    steps = [partial(np.matmul, a, b, out)]
    if beta == 1:
        steps.append(partial(np.add, out, c, out))
    return _or_compiled_fc(a, b, c, out, steps) if beta == 1 else steps


@prepares("aten::linear.out")
def _linear(x, w, b, out):
    if not (_float(x, w, out) and (b is None or _float(b, out)) and w.ndim == 2 and x.ndim >= 1):
        return None
    if not _apart(out, x, w, b) or x.shape[-1] != w.shape[1]:
        return None
    shape = x.shape[:-1] + (w.shape[0],)
    if out.shape != shape or (b is not None and not _fits(out, shape, b.shape)):
        return None
    steps = [partial(np.matmul, x, w.T, out)]
    if b is not None:
        steps.append(partial(np.add, out, b, out))
    return _or_compiled_fc(x, w.T, b, out, steps)


def _or_compiled_fc(x, w, b, out, steps):
    """The kernel's compiled fully connected call (``linalg.compiled_fc``) when it applies
    to these operands, falling back to ``steps`` (the NumPy calls) when the compiled call
    is unavailable at run time, as the kernel does; ``steps`` otherwise."""
    layout = linalg.fc_layout(x, w, b, out)
    if layout is None:
        return steps

    def fc() -> None:
        if not linalg.compiled_fc(x, w, b, out, layout):
            for step in steps:
                step()

    return [fc]


# ---- elementwise -----------------------------------------------------------------------


def _binary(ufunc, a, b, out):
    """``ufunc(a, b)`` into ``out``: both tensors of out's float dtype, or a tensor and a
    number (which the kernel turns into a 0-d array of that dtype, as here)."""
    if _number(b):
        if not _float(a, out):
            return None
        b = scalar(b, a.dtype)
    elif not _float(a, b, out):
        return None
    if not _fits(out, a.shape, b.shape):
        return None
    return [partial(ufunc, a, b, out)]  # out positional: parsed faster than out=


@prepares("aten::add.out", "aten::add.Scalar_out")
def _add(a, b, alpha, out):
    return _binary(np.add, a, b, out) if alpha == 1 else None


@prepares("aten::sub.out", "aten::sub.Scalar_out")
def _sub(a, b, alpha, out):
    return _binary(np.subtract, a, b, out) if alpha == 1 else None


@prepares("aten::mul.out", "aten::mul.Scalar_out")
def _mul(a, b, out):
    return _binary(np.multiply, a, b, out)


@prepares("aten::div.out", "aten::div.Scalar_out")
def _div(a, b, out):
    return _binary(np.true_divide, a, b, out)


@prepares("aten::relu.out")
def _relu(x, out):
    if not _float(x, out) or x.shape != out.shape:
        return None
    return [partial(np.maximum, x, x.dtype.type(0), out=out)]


def _unary(ufunc):
    def prep(x, out):
        # Transcendental loops may differ between contiguous and strided operands: only the
        # layout the kernel itself sees (contiguous in, fresh contiguous out) is taken.
        if not (_float(x, out) and x.shape == out.shape and x.flags.c_contiguous
                and out.flags.c_contiguous):
            return None
        return [partial(ufunc, x, out=out)]
    return prep


for _name, _ufunc in {"aten::exp.out": np.exp, "aten::tanh.out": np.tanh,
                      "aten::sqrt.out": np.sqrt}.items():
    prepares(_name)(_unary(_ufunc))


@prepares("aten::rsqrt.out")
def _rsqrt(x, out):
    steps = _unary(np.sqrt)(x, out)  # the kernel's 1 / np.sqrt(x), in place in out
    if steps is None or not _apart(out, x):
        return None
    return steps + [partial(np.true_divide, 1, out, out=out)]


def _contiguous(x, out) -> bool:
    """The layout the kernel's own call sees (contiguous in, fresh contiguous out), for
    loops whose results may depend on it (transcendentals)."""
    return (_float(x, out) and x.shape == out.shape and x.flags.c_contiguous
            and out.flags.c_contiguous and _apart(out, x))


@prepares("aten::pow.Tensor_Scalar_out")
def _pow(x, exponent, out):
    if not (_number(exponent) and _contiguous(x, out)):
        return None
    return [partial(np.power, x, scalar(exponent, x.dtype), out)]


@prepares("aten::sigmoid.out")
def _sigmoid(x, out):
    """The kernel's exp(-|x|) form: 1 / (1 + e) where x >= 0, e / (1 + e) elsewhere."""
    if not _contiguous(x, out):
        return None
    compiled = special_accel.sigmoid_steps(x, out)
    if compiled is not None:
        return compiled
    e, p, r = (np.empty(x.shape, x.dtype) for _ in range(3))
    pos = np.empty(x.shape, np.bool_)
    return [partial(np.abs, x, out=e), partial(np.negative, e, out=e), partial(np.exp, e, out=e),
            partial(np.add, 1, e, out=p), partial(np.true_divide, 1, p, out=r),
            partial(np.true_divide, e, p, out=out), partial(np.greater_equal, x, 0, out=pos),
            partial(np.copyto, out, r, where=pos)]


@prepares("aten::gelu.out")
def _gelu(x, approximate, out):
    """The erf form in one compiled loop (``special_accel``), the kernel's bits; the tanh
    form and the NumPy path keep the kernel."""
    if approximate != "none" or type(x) is not np.ndarray or type(out) is not np.ndarray:
        return None
    step = special_accel.gelu_step(x, out)
    return None if step is None else [step]


@prepares("aten::where.self_out")
def _where(cond, a, b, out):
    if not (_float(a, b, out) and type(cond) is np.ndarray and cond.dtype == np.bool_):
        return None
    if not (_fits(out, cond.shape, a.shape, b.shape) and _apart(out, cond, a, b)):
        return None
    views = index_accel.select_views(cond, a, b, out) if accel.available() else None
    if views is not None:  # one compiled pass, the same values
        return [partial(index_accel.select, *views)]
    return [partial(np.copyto, out, b), partial(np.copyto, out, a, where=cond)]


_BOOL = np.dtype(np.bool_)


def _comparison(ufunc):
    def prep(a, b, out):
        if type(out) is not np.ndarray or out.dtype != _BOOL:
            return None
        if _number(b):
            if not _float(a):
                return None
            b = scalar(b, a.dtype)
        elif not _float(a, b):
            return None
        if not (_fits(out, a.shape, b.shape) and _apart(out, a, b)):
            return None
        return [partial(ufunc, a, b, out)]
    return prep


for _op, _ufunc in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                    ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
    prepares(f"aten::{_op}.Scalar_out", f"aten::{_op}.Tensor_out")(_comparison(_ufunc))


@prepares("aten::logical_not.out")
def _logical_not(x, out):
    if not (_plain(x) and _plain(out) and out.dtype == _BOOL and x.shape == out.shape):
        return None
    return [partial(np.logical_not, x, out=out)] if _apart(out, x) else None


@prepares("aten::full_like.out")
def _full_like(x, fill_value, memory_format, out):
    if not (_plain(x) and _plain(out) and x.shape == out.shape and out.dtype.kind in "biuf"):
        return None
    if type(fill_value) not in (int, float, bool):
        return None
    return [partial(np.copyto, out, scalar(fill_value, out.dtype))]


# ---- copies of views -------------------------------------------------------------------


def _copy(view, out):
    """The kernel's ``finish(view, out)``: a copy (with a cast) into out, when view has its
    shape and shares no memory with it. A NumPy scalar (x[i] of a 1-d x) is a copy made at load,
    never a view: refused."""
    if type(view) is not np.ndarray or view.shape != out.shape or not _apart(out, view):
        return None
    if view.dtype == out.dtype:
        return [Copy(out, view)]
    if view.dtype.kind not in "biuf" or out.dtype.kind not in "biuf":
        return None
    return [Copy(out, view, casting="unsafe")]  # (steps run warnings-silenced)


def _dim(d, ndim):
    """``d`` as a dimension of a rank-``ndim`` tensor, or None (out of range, or not an int:
    a malformed file's argument, which the kernel refuses at run time)."""
    if type(d) is not int and not isinstance(d, np.integer):
        return None
    return d % ndim if ndim and -ndim <= d < ndim else None


def _plain(x) -> bool:
    return type(x) is np.ndarray


@prepares("aten::clone.out")
def _clone(x, memory_format, out):
    return _copy(x, out) if _plain(x) else None


@prepares("aten::alias_copy.out", "aten::detach_copy.out", "aten::lift_fresh_copy.out")
def _alias(x, out):
    return _copy(x, out) if _plain(x) else None


@prepares("aten::_to_copy.out")
def _to_copy(x, non_blocking, memory_format, out):
    return _copy(x, out) if _plain(x) else None


@prepares("dim_order_ops::_clone_dim_order.out", "dim_order_ops::_to_dim_order_copy.out")
def _dim_order_copy(x, non_blocking, dim_order, out):
    if not _plain(x) or (dim_order is not None and sorted(dim_order) != list(range(out.ndim))):
        return None
    return _copy(x, out)


@prepares("aten::view_copy.out")
def _view(x, size, out):
    if not _plain(x):
        return None
    v = x.view()
    try:
        v.shape = tuple(size)  # raises rather than copy when no view has that shape
    except (ValueError, AttributeError, TypeError):
        return None
    return _copy(v, out)


@prepares("aten::permute_copy.out")
def _permute(x, dims, out):
    if not _plain(x) or len(dims) != x.ndim:
        return None
    axes = [_dim(d, x.ndim) for d in dims]
    if None in axes or len(set(axes)) != len(axes):
        return None
    return _copy(np.transpose(x, axes), out)


@prepares("aten::t_copy.out")
def _t(x, out):
    return _copy(x.T, out) if _plain(x) and x.ndim <= 2 else None


@prepares("aten::transpose_copy.int_out")
def _transpose(x, dim0, dim1, out):
    if not _plain(x) or x.ndim == 0:
        return None
    a, b = _dim(dim0, x.ndim), _dim(dim1, x.ndim)
    return None if a is None or b is None else _copy(np.swapaxes(x, a, b), out)


@prepares("aten::expand_copy.out")
def _expand(x, size, implicit, out):
    lead = len(size) - x.ndim if _plain(x) else -1
    if lead < 0 or any(s == -1 for s in size[:lead]):
        return None
    shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    try:
        view = np.broadcast_to(x, shape)
    except ValueError:
        return None
    return _copy(view, out)


@prepares("aten::unsqueeze_copy.out")
def _unsqueeze(x, dim, out):
    d = _dim(dim, x.ndim + 1) if _plain(x) else None
    return None if d is None else _copy(np.expand_dims(x, d), out)


def _squeezed(x, dims, out):
    if not _plain(x):
        return None
    axes = [_dim(d, x.ndim) for d in dims] if x.ndim else []
    if None in axes or len(set(axes)) != len(axes):
        return None
    axes = tuple(d for d in axes if x.shape[d] == 1)
    return _copy(np.squeeze(x, axis=axes) if axes else x, out)


@prepares("aten::squeeze_copy.dim_out")
def _squeeze_dim(x, dim, out):
    return _squeezed(x, [dim], out)


@prepares("aten::squeeze_copy.dims_out")
def _squeeze_dims(x, dims, out):
    return _squeezed(x, list(dims), out)


@prepares("aten::squeeze_copy.out")
def _squeeze_all(x, out):
    return _copy(np.squeeze(x), out) if _plain(x) else None


@prepares("aten::slice_copy.Tensor_out")
def _slice(x, dim, start, end, step, out):
    if not _plain(x) or x.ndim == 0 or step <= 0:
        return None
    d = _dim(dim, x.ndim)
    if d is None:
        return None
    sl = [slice(None)] * x.ndim
    sl[d] = slice(start, end, step)
    return _copy(x[tuple(sl)], out)


@prepares("aten::select_copy.int_out")
def _select(x, dim, index, out):
    if not _plain(x) or x.ndim == 0:
        return None
    d = _dim(dim, x.ndim)
    if d is None or not -x.shape[d] <= index < x.shape[d]:
        return None
    # the trailing Ellipsis keeps a 0-d *view* when x is 1-d (x[i] alone is a copied scalar)
    return _copy(x[(slice(None),) * d + (index % x.shape[d], Ellipsis)], out)


@prepares("aten::cat.out")
def _cat(tensors, dim, out):
    if type(tensors) is not list or not tensors or \
            not all(_plain(t) and t.dtype == out.dtype and t.ndim == out.ndim and t.ndim > 0
                    for t in tensors):
        return None
    d = _dim(dim, out.ndim)
    if d is None or not _apart(out, *tensors):
        return None
    rest = [t.shape[:d] + t.shape[d + 1:] for t in tensors]
    if any(r != out.shape[:d] + out.shape[d + 1:] for r in rest) or \
            sum(t.shape[d] for t in tensors) != out.shape[d]:
        return None
    return [partial(np.concatenate, list(tensors), axis=d, out=out)]


# ---- reductions and normalisation --------------------------------------------------------


@prepares("aten::_softmax.out")
def _softmax(x, dim, half_to_float, out):
    if not (_float(x, out) and x.ndim and x.shape == out.shape and x.flags.c_contiguous
            and out.flags.c_contiguous and _apart(out, x)):
        return None
    d = _dim(dim, x.ndim)
    if d is None:
        return None
    if d == x.ndim - 1 and 0 < x.shape[-1] <= norm_accel.MAX_ROW and x.size and \
            accel.available():  # three steps: compiled row passes around NumPy's exp
        n = x.shape[-1]
        return norm_accel.softmax_steps(x.reshape(-1, n), np.empty((x.size // n, n), x.dtype),
                                        out.reshape(-1, n))
    keep = x.shape[:d] + (1,) + x.shape[d + 1:]
    m, s = np.empty(keep, x.dtype), np.empty(keep, x.dtype)
    bad = np.empty(keep, np.bool_)
    e = np.empty(x.shape, x.dtype)
    return [
        # the kernel's max shifted to 0 where the row's max is not finite (all -inf rows)
        partial(np.maximum.reduce, x, axis=d, keepdims=True, initial=-np.inf, out=m),
        partial(np.isfinite, m, out=bad),
        partial(np.logical_not, bad, out=bad),
        partial(np.copyto, m, 0.0, where=bad),
        partial(np.subtract, x, m, out=e),
        partial(np.exp, e, out=e),
        partial(np.add.reduce, e, axis=d, keepdims=True, out=s),
        partial(np.true_divide, e, s, out=out),
    ]


@prepares("aten::mean.out")
def _mean(x, dim, keepdim, dtype, out):
    """Mean over the trailing axes (RMSNorm's ``mean(x * x, -1, keepdim=True)``, a global
    average pool's ``mean(x, [-1, -2])``) with the kernel's summation order: element by
    element along each flattened row (``reduction._ordered_sum``). With the accel extra one
    compiled loop adds each row in order; otherwise the rows are copied transposed,
    ``(n, rows)``, and ``np.add.reduce`` over the outer axis adds them one after the other
    into a row-sized accumulator: the same order and bits, without the kernel's accumulate
    temporary and per-row loop (30 -> 4 us for 16 rows of 64)."""
    if not (_float(x, out) and x.ndim >= 1 and dtype is None and x.flags.c_contiguous
            and _apart(out, x)):
        return None
    dims = [dim] if type(dim) is int else list(dim) if dim is not None else None
    axes = sorted(_dim(d, x.ndim) for d in dims) if dims and None not in \
        [_dim(d, x.ndim) for d in dims] else None
    k = len(axes) if axes else 0
    if not axes or axes != list(range(x.ndim - k, x.ndim)):
        return None
    lead = x.shape[:x.ndim - k]
    n = math.prod(x.shape[x.ndim - k:])
    rows = math.prod(lead)
    want = lead + (1,) * k if keepdim else lead
    if rows < 1 or n < 1 or out.shape != want or not out.flags.c_contiguous:
        return None
    total = out.reshape(rows)
    if accel.available():  # one compiled step: each row added in order, then divided
        return [partial(norm_accel.row_mean, x.reshape(rows, n), x.dtype.type(n), total)]
    if rows < 2:  # one row would be a contiguous 1-d reduction, which NumPy sums pairwise
        return None
    work = np.empty((n, rows), x.dtype)
    return [partial(np.copyto, work, x.reshape(rows, n).T),
            partial(np.add.reduce, work, axis=0, out=total),
            partial(np.true_divide, total, x.dtype.type(n), out=total)]


@prepares("aten::any.out")
def _any(x, dim, keepdim, out):
    """``any`` of a bool tensor over one axis (SDPA's "row fully masked" check). Over a short
    last axis the rows are reduced transposed, as ``_mean`` does: NumPy's per-row loop over 16
    values cost ~40 us for 64 rows."""
    if not (_plain(x) and x.dtype == np.bool_ and out.dtype == np.bool_ and x.ndim >= 1
            and type(dim) is int and _apart(out, x) and x.flags.c_contiguous
            and out.flags.c_contiguous):
        return None
    d = _dim(dim, x.ndim)
    want = x.shape[:d] + ((1,) if keepdim else ()) + x.shape[d + 1:]
    if d is None or out.shape != want or x.shape[d] == 0:
        return None
    if d != x.ndim - 1 or x.size // x.shape[d] < 2:
        return [partial(np.logical_or.reduce, x, axis=d, keepdims=keepdim, out=out)]
    n = x.shape[-1]
    rows = x.size // n
    if accel.available():  # one compiled pass (SDPA's 64 rows of 16: 4.5 -> ~1 us)
        return [partial(norm_accel.any_rows, x.reshape(rows, n), out.reshape(rows))]
    work = np.empty((n, rows), np.bool_)
    return [partial(np.copyto, work, x.reshape(rows, n).T),
            partial(np.logical_or.reduce, work, axis=0, out=out.reshape(rows))]


@prepares("aten::native_layer_norm.out")
def _layer_norm(x, normalized_shape, weight, bias, eps, out0, out1, out2):
    k = len(normalized_shape)
    if not (_float(x, out0, out1, out2) and 0 < k <= x.ndim and x.flags.c_contiguous):
        return None
    if tuple(x.shape[x.ndim - k:]) != tuple(normalized_shape) or out0.shape != x.shape:
        return None
    axes = tuple(range(x.ndim - k, x.ndim))
    keep = x.shape[:x.ndim - k] + (1,) * k
    if out1.shape != keep or out2.shape != keep or not _apart(out0, x, out1, out2):
        return None
    for p in (weight, bias):
        if p is not None and not (_float(p, x) and _fits(out0, x.shape, p.shape)):
            return None
    compiled = _layer_norm_compiled(x, normalized_shape, weight, bias, eps, out0, out1, out2)
    if compiled is not None:
        return compiled
    ct = x.dtype.type
    n, e = ct(math.prod(normalized_shape)), ct(eps)
    d, sq = np.empty(x.shape, x.dtype), np.empty(x.shape, x.dtype)
    total, var = np.empty(keep, x.dtype), np.empty(keep, x.dtype)
    steps = [  # (np.add.reduce: what np.sum calls for an ndarray, without its Python wrapper)
        partial(np.add.reduce, x, axis=axes, keepdims=True, out=total),
        partial(np.true_divide, total, n, out=out1),  # mean
        partial(np.subtract, x, out1, out=d),
        partial(np.multiply, d, d, out=sq),
        partial(np.add.reduce, sq, axis=axes, keepdims=True, out=var),
        partial(np.true_divide, var, n, out=var),
        partial(np.add, var, e, out=var),
        partial(np.sqrt, var, out=var),
        partial(np.true_divide, 1, var, out=out2),  # rstd
    ]
    # d * rstd, then * weight, then + bias, the last of them written into out0
    tail = [(np.multiply, out2)] + [(f, p) for f, p in ((np.multiply, weight), (np.add, bias))
                                    if p is not None]
    for j, (f, p) in enumerate(tail):
        steps.append(partial(f, d, p, out=out0 if j == len(tail) - 1 else d))
    return steps


def _layer_norm_compiled(x, normalized_shape, weight, bias, eps, out0, out1, out2):
    """One step: the compiled row loop (``norm_accel``), the kernel's bits in one pass per
    row instead of a dozen NumPy calls. None when numba is off or the operands are not plain
    contiguous rows with a weight and bias of the normalised shape."""
    n = math.prod(normalized_shape)
    if not accel.available() or not 0 < n <= norm_accel.MAX_ROW:
        return None
    arrays = (x, out0, out1, out2) + tuple(p for p in (weight, bias) if p is not None)
    if not all(a.flags.c_contiguous for a in arrays):
        return None
    if any(p is not None and p.shape != tuple(normalized_shape) for p in (weight, bias)):
        return None
    rows = x.size // n
    ct = x.dtype.type
    flat = [None if p is None else p.reshape(n) for p in (weight, bias)]
    stand_in = x.reshape(rows, n)[0] if rows else np.zeros(n, x.dtype)
    args = (x.reshape(rows, n), *(stand_in if p is None else p for p in flat),
            weight is not None, bias is not None, ct(n), ct(eps), ct(1), ct(0),
            out0.reshape(rows, n), out1.reshape(rows), out2.reshape(rows))
    return [partial(norm_accel.layer_norm_loop, *args)]


# ---- convolution ---------------------------------------------------------------------------


@prepares("aten::convolution.out")
def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups,
                 out):
    """A forward convolution of float32/float64 operands: the kernel's algorithm
    (``conv.dispatch``), views and checks chosen once (``conv.nchw.conv_step``), where the
    kernel chooses them on every call."""
    if transposed or not _float(x, w, out) or w.ndim < 3 or x.ndim != w.ndim or \
            type(groups) is not int or (bias is not None and not _float(x, bias)):
        return None
    nsp = w.ndim - 2
    try:
        step = conv_step(x, w, expand_param(stride, nsp, "stride"),
                         expand_param(padding, nsp, "padding"),
                         expand_param(dilation, nsp, "dilation"), groups, bias, out)
    except KernelError:  # (arguments the kernel refuses: it raises them, in context)
        return None
    return None if step is None else [step]


# ---- pooling -------------------------------------------------------------------------------


@prepares("aten::max_pool2d_with_indices.out", unread_outputs=True)
def _max_pool_values(x, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    """The maxima alone when nothing reads the indices (ResNet's stem pooling): the input
    copied into a persistent -inf border, then the kernel's running ``np.maximum`` over the
    window's taps in its order (NaN propagates), without the index bookkeeping: 3-4x faster
    than the kernel."""
    if indices is not None or not _float(x, out) or x.ndim not in (3, 4) or \
            not x.flags.c_contiguous or not _apart(out, x):
        return None
    k, s, p, d, (oh, ow) = _pool_params(x, kernel_size, stride, padding, dilation, ceil_mode,
                                        "max_pool2d")
    x4 = x if x.ndim == 4 else x[None]
    n, c, h, w = x4.shape
    if out.shape != x.shape[:-2] + (oh, ow) or not out.flags.c_contiguous:
        return None
    out4 = out.reshape(n, c, oh, ow)
    (top, bottom), (left, right) = pool_pads((h, w), k, s, p, d, (oh, ow))
    xp = np.full((n, c, top + h + bottom, left + w + right), -np.inf, x.dtype)
    taps = [xp[:, :, i * d[0] : i * d[0] + (oh - 1) * s[0] + 1 : s[0],
               j * d[1] : j * d[1] + (ow - 1) * s[1] + 1 : s[1]]
            for i in range(k[0]) for j in range(k[1])]
    steps = [partial(np.copyto, xp[:, :, p[0] : p[0] + h, p[1] : p[1] + w], x4),
             partial(np.copyto, out4, taps[0])]
    return steps + [partial(np.maximum, out4, t, out=out4) for t in taps[1:]]


# ---- indexing ------------------------------------------------------------------------------


@prepares("aten::embedding.out")
def _embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    if not (_plain(weight) and _plain(indices) and indices.dtype == INT64 and weight.ndim == 2
            and weight.dtype == out.dtype and out.shape == indices.shape + weight.shape[1:]
            and _apart(out, weight, indices)):
        return None
    n = weight.shape[0]
    as_unsigned = indices.view(np.uint64)  # negative indices become >= 2**63: one max checks both

    def run() -> None:  # the indices are data: checked on every call, as the kernel does
        if indices.size and as_unsigned.max() >= n:
            raise invalid(f"embedding: index out of range for a table of {n} rows")
        np.take(weight, indices, axis=0, out=out, mode="clip")  # in range: clip is a no-op

    if accel.available() and weight.dtype in index_accel.GATHER_DTYPES and indices.size and \
            all(a.flags.c_contiguous for a in (weight, indices, out)):
        gather = index_accel.gather_rows

        def run_compiled() -> None:  # checked and copied in one compiled call
            if not gather(weight, indices, out):
                run()  # (raises, naming the table)
        return [run_compiled]
    return [run]
