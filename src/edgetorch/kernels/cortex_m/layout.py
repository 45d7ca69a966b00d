"""Cortex-M data movement: CMSIS-NN's ``arm_transpose_s8`` and ``arm_pad_s8`` as ExecuTorch's
``cortex_m::transpose`` / ``cortex_m::pad`` call them (int8, up to 4 dims).

``pad`` works on the bytes as laid out: its ``pre_pad``/``post_pad`` are per memory dim (NHWC
for a channels-last tensor, the AOT pass converts them), right-aligned to four dims.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import I64, INT8, read_bytes, require, require_dtype, write_bytes

MAX_DIMS = 4


@kernel("cortex_m::transpose.out")
def transpose_out(input, perm, out):
    op = "cortex_m::transpose.out"
    for name, x in (("input", input), ("out", out)):
        require_dtype(op, name, x, INT8)
    require(1 <= input.ndim <= MAX_DIMS, f"{op}: rank must be 1..{MAX_DIMS}, got {input.ndim}")
    perm = [int(p) for p in perm]
    require(sorted(perm) == list(range(input.ndim)), f"{op}: perm {perm} is not a permutation "
            f"of the {input.ndim} dims")
    expected = tuple(input.shape[p] for p in perm)
    require(tuple(out.shape) == expected, f"{op}: out has shape {list(out.shape)}, expected "
            f"{list(expected)}")
    # CMSIS-NN reads the bytes as a row-major tensor of the logical sizes
    return write_bytes(out, read_bytes(input, input.shape).transpose(perm).astype(I64), op)


def _channels_last(x: np.ndarray) -> bool:
    """ExecuTorch's ``is_channels_last_tensor``: ambiguous layouts count as channels-last."""
    if x.ndim != 4:
        return False
    if x.shape[1] == 1 or (x.shape[2] == 1 and x.shape[3] == 1):
        return True
    order = sorted(range(4), key=lambda d: -x.strides[d])
    return order == [0, 2, 3, 1]


@kernel("cortex_m::pad.out")
def pad_out(input, pre_pad, post_pad, pad_value, out):
    op = "cortex_m::pad.out"
    for name, x in (("input", input), ("out", out)):
        require_dtype(op, name, x, INT8)
    require(1 <= input.ndim <= MAX_DIMS, f"{op}: rank must be 1..{MAX_DIMS}, got {input.ndim}")
    pre, post = [int(p) for p in pre_pad], [int(p) for p in post_pad]
    require(len(pre) == len(post) == MAX_DIMS and min(pre + post) >= 0,
            f"{op}: pre_pad {pre} and post_pad {post} must be 4 non-negative values")
    sizes = [input.shape[d] for d in ((0, 2, 3, 1) if _channels_last(input)
                                      else range(input.ndim))]
    dims = [1] * (MAX_DIMS - input.ndim) + sizes
    padded = np.pad(read_bytes(input, dims).astype(I64), list(zip(pre, post)),
                    constant_values=int(np.int8(pad_value)))
    require(padded.size == out.size, f"{op}: padding {dims} by {pre}/{post} gives "
            f"{list(padded.shape)}, out has shape {list(out.shape)}")
    return write_bytes(out, padded, op)
