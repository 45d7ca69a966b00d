"""Argument checks and layout helpers the Cortex-M kernels share.

The runtime hands kernels logical arrays (a channels-last tensor is a strided view of its
NHWC bytes). ExecuTorch's Cortex-M kernels hand CMSIS-NN the tensor's bytes with dims read
from the logical sizes (``{N, H, W, C}`` from ``[N, C, H, W]``), so ``read_bytes``/``write_bytes``
go through the bytes as they are laid out in memory: for the channels-last tensors the AOT
passes plan, that is NHWC. Integer work is done in int64 holding int32 values (see ``cmsis``).
"""

from __future__ import annotations

import numpy as np

from ..portable._util import invalid

INT8 = np.dtype(np.int8)
INT16 = np.dtype(np.int16)
INT32 = np.dtype(np.int32)
I64 = np.int64


def require(cond: bool, message: str) -> None:
    if not cond:
        raise invalid(message)


def require_dtype(op: str, name: str, x: np.ndarray, *dtypes: np.dtype) -> None:
    require(x.dtype in dtypes, f"{op}: {name} must be {' or '.join(map(str, dtypes))}, got "
            f"{x.dtype}; this operator runs CMSIS-NN's integer kernels")


def require_rank(op: str, name: str, x: np.ndarray, rank: int) -> None:
    require(x.ndim == rank, f"{op}: {name} must be {rank}-D, got shape {list(x.shape)}")


def pair(op: str, name: str, values) -> tuple[int, int]:
    values = [int(v) for v in values]
    require(len(values) == 2, f"{op}: {name} must have 2 elements, got {values}")
    return values[0], values[1]


def store(out: np.ndarray, values: np.ndarray, op: str) -> np.ndarray:
    """Write int64 ``values`` (out's logical shape) into ``out``, cast to its dtype."""
    require(tuple(values.shape) == tuple(out.shape),
            f"{op}: the result has shape {list(values.shape)}, out has {list(out.shape)}; "
            "the program planned the wrong output size")
    np.copyto(out, values.astype(out.dtype, copy=False), casting="unsafe")
    return out


def memory_order(x: np.ndarray) -> np.ndarray:
    """``x`` with its axes in memory order (largest stride first, stable): the array a C
    kernel walking the bytes sees."""
    axes = sorted(range(x.ndim), key=lambda d: -x.strides[d])
    return x.transpose(axes)


def read_bytes(x: np.ndarray, shape) -> np.ndarray:
    """``x``'s elements in memory order, as an array of ``shape`` (a C kernel's view)."""
    return memory_order(x).reshape(shape)


def write_bytes(out: np.ndarray, values: np.ndarray, op: str) -> np.ndarray:
    """Write ``values`` (int64, in memory order) into ``out``'s memory, cast to its dtype."""
    flat = memory_order(out)
    require(flat.size == values.size, f"{op}: the result has {values.size} elements, out "
            f"{flat.size}; the program planned the wrong output size")
    target = flat.reshape(-1) if flat.flags.c_contiguous else None
    if target is None:  # not one block of memory: fall back to the logical layout
        np.copyto(flat, values.reshape(flat.shape).astype(out.dtype), casting="unsafe")
    else:
        np.copyto(target, values.reshape(-1).astype(out.dtype, copy=False), casting="unsafe")
    return out


def nhwc_shape(x: np.ndarray) -> tuple[int, int, int, int]:
    """CMSIS-NN's ``{n, h, w, c}`` dims of a logical ``[N, C, H, W]`` tensor."""
    n, c, h, w = x.shape
    return n, h, w, c
