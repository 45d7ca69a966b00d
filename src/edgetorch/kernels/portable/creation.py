"""Creation kernels: full, zeros, ones, empty, fill, scalar_tensor, arange."""

from __future__ import annotations

import math

import numpy as np

from ..registry import kernel
from ._util import FLOAT64, INT64, check_result_fits, finish, invalid, is_bool, is_float, scalar


def _shape(size) -> tuple[int, ...]:
    if any(s < 0 for s in size):
        raise invalid(f"negative dimension in size {list(size)}")
    return tuple(size)


def _filled(shape, value, out: np.ndarray, op: str) -> np.ndarray:
    if tuple(shape) == out.shape:
        out[...] = scalar(value, out.dtype)
        return out
    check_result_fits(shape, out, op)  # a size from a corrupt file must not allocate
    return np.full(shape, scalar(value, out.dtype))


@kernel("aten::full.out")
def full_out(size, fill_value, out):
    return _filled(_shape(size), fill_value, out, "full")


@kernel("aten::full_like.out")
def full_like_out(self, fill_value, memory_format, out):
    return _filled(self.shape, fill_value, out, "full_like")


@kernel("aten::fill.Scalar_out")
def fill_scalar_out(self, value, out):
    return _filled(self.shape, value, out, "fill")


@kernel("aten::fill.Tensor_out")
def fill_tensor_out(self, value, out):
    if value.ndim != 0:
        raise invalid(f"fill: the value must be a 0-dim tensor, got shape {list(value.shape)}")
    return finish(np.broadcast_to(value, self.shape), out, convert=True)


@kernel("aten::zeros.out")
def zeros_out(size, out):
    return _filled(_shape(size), 0, out, "zeros")


@kernel("aten::ones.out")
def ones_out(size, out):
    return _filled(_shape(size), 1, out, "ones")


@kernel("aten::empty.out")
def empty_out(size, memory_format, out):
    # Uninitialised in torch; zeros here so that runs are reproducible.
    return _filled(_shape(size), 0, out, "empty")


@kernel("aten::scalar_tensor.out")
def scalar_tensor_out(s, out):
    return _filled((), s, out, "scalar_tensor")


def _arange(start, end, step, out):
    if step == 0:
        raise invalid("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise invalid(f"arange: upper bound {end} and lower bound {start} are inconsistent "
                      f"with step sign {step}")
    count = (float(end) - float(start)) / float(step)
    if not math.isfinite(count):
        raise invalid(f"arange: start {start}, end {end} and step {step} give no finite length")
    check_result_fits((math.ceil(count),), out, "arange")
    if is_float(out.dtype) or is_bool(out.dtype):
        n = math.ceil(count)
        # torch accumulates start + i * step in double for floating outputs
        r = float(start) + float(step) * np.arange(n, dtype=FLOAT64)
    else:
        start, end, step = int(start), int(end), int(step)
        n = math.ceil(float(end - start) / step)
        r = start + step * np.arange(n, dtype=INT64)
    return finish(r, out, convert=True)


@kernel("aten::arange.start_out")
def arange_start_out(start, end, step, out):
    return _arange(start, end, step, out)


@kernel("aten::arange.out")
def arange_out(end, out):
    return _arange(0, end, 1, out)
