"""Helpers shared by the portable kernels: torch's type promotion, dims, writing results.

Nothing here is a kernel. The rules mirror PyTorch's (``c10/core/ScalarType.h``'s
``promoteTypes`` and ``at::native::result_type``) on the NumPy dtypes the runtime uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...errors import ErrorCode, KernelError
from ...schema.scalar_type import to_numpy_dtype

try:  # bfloat16/float8 arrive as ml_dtypes dtypes (kind 'V'); they are floats to torch.
    import ml_dtypes as _ml

    _LOW_FLOATS = frozenset(
        np.dtype(t)
        for t in (_ml.bfloat16, _ml.float8_e5m2, _ml.float8_e4m3fn, _ml.float8_e5m2fnuz,
                  _ml.float8_e4m3fnuz)
    )
except ImportError:  # pragma: no cover - the minimal runtime environment
    _LOW_FLOATS = frozenset()

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
FLOAT16 = np.dtype(np.float16)


def invalid(message: str) -> KernelError:
    """The error a kernel raises for arguments ExecuTorch's kernel would reject."""
    return KernelError(message, code=ErrorCode.InvalidArgument)


def check_result_fits(shape: Sequence[int], out: np.ndarray, op: str) -> None:
    """Refuse, before computing, a result whose size comes from the arguments and cannot fit
    ``out``. A planned output is a view into its method's arena sized for its upper bound, so
    no valid result holds more elements than fit from ``out``'s first byte to the end of the
    memory it views (ExecuTorch's kernels resize ``out`` before computing, to the same effect);
    without this, sizes read from a corrupt file make a kernel allocate whatever they say."""
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    root = out
    while isinstance(root.base, np.ndarray):
        root = root.base
    cap = out.size
    if root.flags.c_contiguous and out.itemsize:
        end = root.__array_interface__["data"][0] + root.nbytes
        cap = max(cap, (end - out.__array_interface__["data"][0]) // out.itemsize)
    if n > cap:
        raise invalid(f"{op}: the result {list(shape)} ({n} elements) cannot fit its output "
                      f"{list(out.shape)} (room for {cap}); the program's sizes and this "
                      "operator's arguments disagree (a corrupt or mis-exported program)")


# ---- dtypes ----------------------------------------------------------------------------


def is_float(dt: np.dtype) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in _LOW_FLOATS


def is_int(dt: np.dtype) -> bool:
    return np.dtype(dt).kind in "iu"


def is_bool(dt: np.dtype) -> bool:
    return np.dtype(dt) == BOOL


def opmath(dt: np.dtype) -> np.dtype:
    """The dtype torch computes a dtype's arithmetic in: float32 for half/bfloat16/float8."""
    dt = np.dtype(dt)
    if dt == FLOAT16 or dt in _LOW_FLOATS:
        return FLOAT32
    return dt


def float_compute(dt: np.dtype) -> np.dtype:
    """Compute dtype of ops that promote integers to the default float (exp, div, mean...)."""
    return opmath(dt) if is_float(dt) else FLOAT32


def promote_types(a: np.dtype | None, b: np.dtype | None) -> np.dtype | None:
    """torch.promote_types for the dtypes NumPy represents."""
    if a is None:
        return b
    if b is None:
        return a
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        if a in _LOW_FLOATS or b in _LOW_FLOATS:
            # bfloat16 with float16 (or float8 mixes) -> float32; with float32/64 -> the wider.
            wide = [t for t in (a, b) if t not in _LOW_FLOATS and t != FLOAT16]
            return wide[0] if wide else FLOAT32
        return np.promote_types(a, b)
    if fa:
        return a
    if fb:
        return b
    return np.promote_types(a, b)  # bool/int with bool/int: NumPy agrees with torch here


def _scalar_dtype(value: object) -> np.dtype:
    """The dtype torch gives a wrapped Python number: bool, int64 or the default float32."""
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return INT64
    if isinstance(value, (float, np.floating)):
        return FLOAT32
    raise invalid(f"unsupported scalar {value!r} of type {type(value).__name__}")


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    if higher is None:
        return lower
    if lower is None:
        return higher
    if is_float(higher):
        return higher
    if higher == BOOL or is_float(lower):
        return promote_types(higher, lower)
    return higher


def result_type(*operands: object) -> np.dtype:
    """torch.result_type over tensors (arrays) and Python scalars; ``None`` entries ignored.

    Dimensioned tensors outrank zero-dim tensors, which outrank Python scalars, unless a
    lower-priority operand is of a higher category (bool < integer < float).
    """
    dim = zero = wrapped = None
    for x in operands:
        if x is None:
            continue
        if isinstance(x, np.ndarray):
            if x.ndim > 0:
                dim = promote_types(dim, x.dtype)
            else:
                zero = promote_types(zero, x.dtype)
        else:
            wrapped = promote_types(wrapped, _scalar_dtype(x))
    out = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise invalid("cannot infer a dtype: no operands")
    return out


def scalar_type_arg(st: int | None) -> np.dtype | None:
    """A ``ScalarType?`` argument (an int) as a NumPy dtype."""
    if st is None:
        return None
    try:
        return to_numpy_dtype(st)
    except (KeyError, ValueError):
        raise invalid(f"unsupported ScalarType {st}") from None


# ---- values ----------------------------------------------------------------------------


def scalar(value: object, dt: np.dtype) -> np.ndarray:
    """A Python scalar as a 0-d array of ``dt``, converting the way torch does (ints wrap)."""
    with np.errstate(all="ignore"):
        if is_int(dt) and isinstance(value, int) and not isinstance(value, bool):
            return np.array(value & ((1 << 64) - 1), dtype=np.uint64).astype(dt)
        return np.asarray(value).astype(dt)


def cast(x: object, dt: np.dtype) -> np.ndarray:
    """An array operand or a scalar operand, in dtype ``dt``."""
    if isinstance(x, np.ndarray):
        return x.astype(dt, copy=False)
    return scalar(x, dt)


def into(out: object, shape: Sequence[int], dtype: np.dtype) -> np.ndarray | None:
    """``out`` when a ufunc can write its result there directly (same shape and dtype, so
    ``finish`` has nothing left to copy); None to let the ufunc allocate."""
    if isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == tuple(shape):
        return out
    return None


def can_cast(src: np.dtype, dst: np.dtype) -> bool:
    """torch's ``canCast``, which ExecuTorch's kernels check before writing ``out``."""
    if dst.kind == "b":
        return src.kind == "b"
    if dst.kind in "iu":
        return src.kind in "biu"
    return dst.kind == "c" or src.kind != "c"


def finish(result: object, out: np.ndarray, convert: bool = False) -> np.ndarray:
    """Write ``result`` into ``out`` when it has out's shape, else return it as ``out.dtype``.
    A result ``out`` cannot hold under torch's ``canCast`` (a float result into a bool or
    integer ``out``) is refused unless the kernel is a conversion (``convert=True``)."""
    if result is out:
        return out
    if type(result) is not np.ndarray:
        result = np.asarray(result)
    if result.dtype == out.dtype:  # a plain copy raises no floating-point error: no errstate
        if result.shape == out.shape:
            np.copyto(out, result)
            return out
        return result
    if not convert and not can_cast(result.dtype, out.dtype):
        raise invalid(f"the result is {result.dtype}, which cannot be cast to the out tensor's "
                      f"{out.dtype} (torch's canCast: no floating -> integral, no non-bool -> "
                      "bool, no complex -> real)")
    with np.errstate(all="ignore"):
        if result.shape == out.shape:
            np.copyto(out, result, casting="unsafe")
            return out
        return result.astype(out.dtype, copy=False)


# ---- dims ------------------------------------------------------------------------------


def wrap_dim(dim: int, ndim: int) -> int:
    """Normalise a possibly negative dim; a 0-d tensor accepts dims -1 and 0, as in torch."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise invalid(f"dim {dim} is out of range for a tensor of rank {ndim}")
    return dim % n


def reduce_axes(ndim: int, dims: Sequence[int] | int | None, *, empty_is_all: bool = True
                ) -> tuple[int, ...]:
    """The axes a reduction's ``dim`` argument names (None, or [] when ``empty_is_all``: all)."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return tuple(range(ndim)) if empty_is_all else ()
    axes = [wrap_dim(d, ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise invalid(f"dim {list(dims)} appears multiple times in the list of dims")
    if ndim == 0:
        return ()
    return tuple(sorted(axes))


def expand_param(values: Sequence[int] | int, n: int, name: str) -> list[int]:
    """An ``int[n]`` argument given with one element stands for all ``n``."""
    if isinstance(values, int):
        return [values] * n
    values = list(values)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise invalid(f"{name} must have 1 or {n} elements, got {values}")
    return values


def windows(x: np.ndarray, kernel_size, stride, dilation, out_size) -> np.ndarray:
    """View (N, C, *out_size, *kernel_size) of ``x`` (N, C, *spatial), no copy."""
    nsp = len(kernel_size)
    extent = [d * (k - 1) + 1 for k, d in zip(kernel_size, dilation)]
    v = sliding_window_view(x, extent, axis=tuple(range(2, 2 + nsp)))
    sl = (slice(None), slice(None))
    sl += tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_size, stride))
    sl += tuple(slice(None, None, d) for d in dilation)
    return v[sl]
