"""Materialising a plan's values: arenas, tensor slots, scalars and boxed lists.

Every planned tensor is a NumPy view into its arena at its planned offset; constants are
zero-copy views of the program file. ``TensorSlot`` remembers where a tensor's bytes live so
a dynamic-shape tensor can be re-viewed with a new shape within its planned capacity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidProgramError, MemoryAllocationError, ResizeError
from ..schema import program as S
from ..schema.scalar_type import ScalarType, is_known, numpy_dtypes, to_numpy_dtype

# A program may claim any arena size; refuse absurd ones instead of trying to allocate them.
MAX_ARENA_BYTES = 1 << 34  # 16 GiB
MAX_UNPLANNED_BYTES = 1 << 31
DTYPES: dict[int, np.dtype] = numpy_dtypes()  # ScalarType value -> dtype, for the loader


_CONTIGUOUS = [tuple(range(n)) for n in range(17)]  # the identity dim orders, by rank


def contiguous_order(dim_order: tuple[int, ...]) -> bool:
    """Whether ``dim_order`` is the identity (a C-contiguous tensor)."""
    n = len(dim_order)
    return dim_order == (_CONTIGUOUS[n] if n < len(_CONTIGUOUS) else tuple(range(n)))


def strided_view(buf: np.ndarray | memoryview, offset: int, dtype: np.dtype,
                 sizes: tuple[int, ...], dim_order: tuple[int, ...]) -> np.ndarray:
    """A view of ``buf[offset:]`` as a tensor of logical ``sizes`` laid out in ``dim_order``."""
    if contiguous_order(dim_order):
        return np.ndarray(sizes, dtype, buf, offset)
    physical = tuple(sizes[d] for d in dim_order)
    return np.ndarray(physical, dtype, buf, offset).transpose(np.argsort(dim_order))


@dataclass
class TensorSlot:
    """Where one tensor value's bytes live and how far it may grow."""

    index: int
    dtype: np.dtype
    dim_order: tuple[int, ...]
    bound: tuple[int, ...]  # planned (upper-bound) sizes
    dynamism: S.TensorShapeDynamism
    buffer: np.ndarray | None  # the arena (planned) or None (bound at run time)
    offset: int

    @property
    def capacity(self) -> int:
        return math.prod(self.bound)

    def view(self, sizes: tuple[int, ...]) -> np.ndarray:
        assert self.buffer is not None
        return strided_view(self.buffer, self.offset, self.dtype, sizes, self.dim_order)

    def check_resize(self, sizes: tuple[int, ...], what: str) -> None:
        if len(sizes) != len(self.bound):
            raise ResizeError(f"{what}: rank {len(sizes)} does not match the planned rank "
                              f"{len(self.bound)} (sizes {list(self.bound)})")
        if self.dynamism == S.TensorShapeDynamism.STATIC:
            raise ResizeError(f"{what}: cannot resize a static tensor of sizes {list(self.bound)} "
                              f"to {list(sizes)}")
        if math.prod(sizes) > self.capacity:
            raise ResizeError(
                f"{what}: attempted to resize a bounded tensor with capacity of {self.capacity} "
                f"elements (upper bound {list(self.bound)}) to {list(sizes)}; export with a larger "
                "torch.export.Dim max to allow it")


@dataclass
class BoxedList:
    """An IntList/TensorList/OptionalTensorList: items are value indices resolved at use."""

    kind: type
    items: tuple[int, ...]

    def resolver(self, vals: list[Any]) -> Callable[[], list[Any]]:
        items = self.items
        if self.kind is S.OptionalTensorList:
            return lambda: [None if i < 0 else vals[i] for i in items]
        return lambda: [vals[i] for i in items]


def dtype_of(st: int, where: str) -> np.dtype:
    dtype = DTYPES.get(st)
    if dtype is not None:
        return dtype
    if not is_known(st):
        name = ScalarType(st).name if st in ScalarType._value2member_map_ else str(st)
        raise InvalidProgramError(
            f"{where}: scalar type {name} is not supported by this runtime"
            + (" (install ml_dtypes for bfloat16/float8)" if name.startswith(("BFLOAT", "FLOAT8")) else ""))
    return to_numpy_dtype(st)


def allocate_arenas(sizes: list[int], method: str, devices: list[Any] | None = None
                    ) -> list[np.ndarray | None]:
    """One zeroed byte arena per memory id; index 0 is ExecuTorch's reserved slot. An arena
    that ``devices`` (the plan's ``non_const_buffer_device``) puts on a device comes from that
    device's registered allocator; without one the method does not load, as in ExecuTorch."""
    placed = {}
    for entry in devices or []:
        if not 0 < entry.buffer_idx < len(sizes):
            raise InvalidProgramError(
                f"method {method!r}: non_const_buffer_device names buffer {entry.buffer_idx}, "
                f"but the method plans buffers 1..{len(sizes) - 1}")
        if int(entry.device_type) != 0:  # CPU entries change nothing
            placed[entry.buffer_idx] = (int(entry.device_type), int(entry.device_index))
    arenas: list[np.ndarray | None] = [None]
    for mem_id, size in enumerate(sizes[1:], start=1):
        if size < 0 or size > MAX_ARENA_BYTES:
            raise MemoryAllocationError(
                f"method {method!r}: planned buffer {mem_id} claims {size} bytes, beyond the "
                f"{MAX_ARENA_BYTES} bytes this runtime allocates; the program is corrupt or "
                "needs a different memory plan")
        if mem_id in placed:
            arenas.append(_device_arena(method, mem_id, size, *placed[mem_id]))
            continue
        try:
            arenas.append(np.zeros(size, dtype=np.uint8))
        except MemoryError as e:
            raise MemoryAllocationError(
                f"method {method!r}: cannot allocate planned buffer {mem_id} of {size} bytes") from e
    return arenas


def _device_arena(method: str, mem_id: int, size: int, device: int, index: int) -> np.ndarray:
    from .device_allocator import get_device_allocator

    allocator = get_device_allocator(device)
    buffer = allocator.allocate(size, index) if allocator is not None else None
    if buffer is None or buffer.dtype != np.uint8 or buffer.nbytes < size:
        why = "no device allocator is registered for device type" if allocator is None else \
            "the device allocator returned no usable buffer for device type"
        # ExecuTorch's words (its buffer index counts planned buffers from 0).
        raise MemoryAllocationError(
            f"Failed to allocate {size} bytes for buffer {mem_id - 1} on device {device}:{index} "
            f"(method {method!r}: {why} {device}). Try: register one with "
            "edgetorch.runtime.register_device_allocator(...), or export with "
            "ExecutorchBackendConfig(enable_non_cpu_memory_planning=False) to plan every "
            "tensor in host memory")
    return buffer.reshape(-1)[:size]
