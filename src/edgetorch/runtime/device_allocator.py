"""Device allocators (ExecuTorch's ``runtime/core/device_allocator.h``): where a method's
buffers planned on a device (``ExecutionPlan.non_const_buffer_device``) come from.

ExecuTorch's runtime allocates such a buffer with the allocator registered for its device
type and refuses to load the method when there is none ("Failed to allocate N bytes for
buffer i on device T:I"); so does this one. Nothing is registered by default: edgetorch runs
every kernel on the host. A registered allocator must hand out NumPy-addressable bytes (host
memory standing in for the device, or memory the device shares with the host), since the
kernels and the ``et_copy`` host/device copies read and write them as arrays.
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import InvalidArgumentError
from ..schema.program import DeviceType

DEFAULT_ALIGNMENT = 16  # ExecuTorch's MemoryAllocator::kDefaultAlignment


class DeviceAllocator:
    """Allocates the planned buffers of one device type."""

    def device_type(self) -> DeviceType:
        raise NotImplementedError

    def allocate(self, nbytes: int, index: int, alignment: int = DEFAULT_ALIGNMENT) -> np.ndarray:
        """``nbytes`` zeroed bytes (a 1-d uint8 array) on device ``index``."""
        raise NotImplementedError


class HostDeviceAllocator(DeviceAllocator):
    """Host memory standing in for device ``device`` (tests, or a device sharing host memory)."""

    def __init__(self, device: DeviceType = DeviceType.CUDA) -> None:
        self._device = DeviceType(device)
        self.allocated: list[tuple[int, int]] = []  # (nbytes, index), for inspection

    def device_type(self) -> DeviceType:
        return self._device

    def allocate(self, nbytes: int, index: int, alignment: int = DEFAULT_ALIGNMENT) -> np.ndarray:
        self.allocated.append((nbytes, index))
        return np.zeros(nbytes, dtype=np.uint8)


_ALLOCATORS: dict[DeviceType, DeviceAllocator] = {}
_LOCK = threading.Lock()


def register_device_allocator(allocator: DeviceAllocator) -> None:
    """Register ``allocator`` for its ``device_type()``; one per device type, as ExecuTorch."""
    device = DeviceType(allocator.device_type())
    if device == DeviceType.CPU:
        raise InvalidArgumentError("CPU buffers come from the method's own arenas; register a "
                                   "device allocator for a non-CPU device type")
    with _LOCK:
        if device in _ALLOCATORS:
            raise InvalidArgumentError(
                f"a device allocator is already registered for {device.name}; unregister it "
                "first (unregister_device_allocator)")
        _ALLOCATORS[device] = allocator


def unregister_device_allocator(device: DeviceType) -> DeviceAllocator | None:
    """Remove the allocator of ``device`` (ExecuTorch's registry cannot; tests need to)."""
    with _LOCK:
        return _ALLOCATORS.pop(DeviceType(device), None)


def get_device_allocator(device: DeviceType | int) -> DeviceAllocator | None:
    try:
        return _ALLOCATORS.get(DeviceType(device))
    except ValueError:  # a device type this schema does not know
        return None
