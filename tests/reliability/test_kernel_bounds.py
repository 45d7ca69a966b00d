"""Kernels whose result size comes from an argument (upsampling's output_size) refuse, before
computing, a result that cannot fit the memory their ``out`` views (fuzzing found a program
whose output_size made upsample_bilinear2d compute 135 MB before the runtime rejected it)."""

from __future__ import annotations

import numpy as np
import pytest

from edgetorch.errors import KernelError
from edgetorch.kernels import get_kernel
from edgetorch.kernels.portable._util import check_result_fits


def _planned(arena_bytes: int, shape, dtype=np.float32) -> np.ndarray:
    """An output the way the runtime makes one: a view at the start of a larger arena."""
    arena = np.zeros(arena_bytes, np.uint8)
    n = int(np.prod(shape))
    return arena[: n * np.dtype(dtype).itemsize].view(dtype).reshape(shape)


@pytest.mark.parametrize("op,args", [
    ("aten::upsample_bilinear2d.vec_out", lambda x: [x, [60000, 60000], False, None]),
    ("aten::upsample_nearest2d.vec_out", lambda x: [x, [60000, 60000], None]),
    ("aten::_upsample_bilinear2d_aa.out", lambda x: [x, [60000, 60000], False, None, None]),
])
def test_upsampling_to_a_size_the_output_cannot_hold_is_refused(op, args):
    x = np.ones((2, 4, 8, 8), np.float32)
    out = _planned(2 * 4 * 16 * 16 * 4, (2, 4, 16, 16))
    with pytest.raises(KernelError, match=r"\[2, 4, 60000, 60000\].*cannot fit its output"):
        get_kernel(op).fn(*args(x), out)


def test_a_dynamic_result_within_the_arena_is_allowed():
    """The arena is sized for the upper bound: a result bigger than out's current view but
    within the bound is fine (the runtime then resizes out)."""
    out = _planned(2 * 4 * 16 * 16 * 4, (2, 4, 8, 8))
    check_result_fits((2, 4, 16, 16), out, "op")
    with pytest.raises(KernelError):
        check_result_fits((2, 4, 16, 17), out, "op")
    got = get_kernel("aten::upsample_nearest2d.vec_out").fn(
        np.ones((2, 4, 8, 8), np.float32), [16, 16], None, out)
    assert got.shape == (2, 4, 16, 16)


@pytest.mark.parametrize("op,args,shape", [
    ("aten::full.out", lambda x: [[60000, 60000], 1.0], [60000, 60000]),
    ("aten::zeros.out", lambda x: [[60000, 60000]], [60000, 60000]),
    ("aten::ones.out", lambda x: [[60000, 60000]], [60000, 60000]),
    ("aten::empty.out", lambda x: [[60000, 60000], None], [60000, 60000]),
    ("aten::expand_copy.out", lambda x: [x, [60000, 4, 8], False], [60000, 4, 8]),
    ("aten::repeat.out", lambda x: [x, [60000, 1, 60000]], [60000, 4, 480000]),
])
def test_sizes_from_arguments_are_bounded_before_allocating(op, args, shape):
    """Creation, expand and repeat take their result size from an argument (a corrupt file
    can say anything): refused before NumPy allocates it."""
    x = np.ones((1, 4, 8), np.float32)
    out = _planned(4 * 64 * 4, (4, 8, 8))
    with pytest.raises(KernelError, match=r"cannot fit its output") as err:
        get_kernel(op).fn(*args(x), out)
    assert str(shape) in str(err.value)


def test_repeat_refuses_negative_counts_and_still_repeats():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(KernelError, match="negative repeat"):
        get_kernel("aten::repeat.out").fn(x, [1, -2], np.empty((2, 6), np.float32))
    got = get_kernel("aten::repeat.out").fn(x, [2, 1, 2], np.empty((2, 2, 6), np.float32))
    np.testing.assert_array_equal(got, np.tile(x, (2, 1, 2)))
