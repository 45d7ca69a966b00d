"""Device allocators (torch-free): a buffer the plan puts on a device comes from the allocator
registered for that device, or the method does not load -- ExecuTorch 1.5.1's behaviour.
Whole programs: tests/exir/test_device_planning.py and tests/compat/test_compat_device.py."""

from __future__ import annotations

import numpy as np
import pytest

from edgetorch.errors import InvalidArgumentError, InvalidProgramError, MemoryAllocationError
from edgetorch.runtime import (
    DeviceAllocator,
    HostDeviceAllocator,
    get_device_allocator,
    register_device_allocator,
    unregister_device_allocator,
)
from edgetorch.runtime.values import allocate_arenas
from edgetorch.schema.program import DeviceType, NonConstBufferDevice

CUDA_BUFFER_2 = [NonConstBufferDevice(buffer_idx=2, device_type=DeviceType.CUDA, device_index=0)]


@pytest.fixture
def cuda():
    allocator = HostDeviceAllocator(DeviceType.CUDA)
    register_device_allocator(allocator)
    try:
        yield allocator
    finally:
        unregister_device_allocator(DeviceType.CUDA)


def test_host_buffers_need_no_allocator():
    arenas = allocate_arenas([0, 32, 64], "forward", None)
    assert arenas[0] is None and [a.size for a in arenas[1:]] == [32, 64]


def test_device_buffer_without_allocator_is_refused():
    assert get_device_allocator(DeviceType.CUDA) is None
    with pytest.raises(MemoryAllocationError) as info:
        allocate_arenas([0, 32, 64], "forward2", CUDA_BUFFER_2)
    message = str(info.value)
    assert "Failed to allocate 64 bytes for buffer 1 on device 1:0" in message  # ExecuTorch's
    assert "'forward2'" in message and "register_device_allocator" in message


def test_device_buffer_comes_from_its_allocator(cuda):
    arenas = allocate_arenas([0, 32, 64], "forward2", CUDA_BUFFER_2)
    assert cuda.allocated == [(64, 0)]  # the host buffer is not the allocator's
    assert arenas[2].dtype == np.uint8 and arenas[2].size == 64 and not arenas[2].any()


def test_bad_device_entries():
    with pytest.raises(InvalidProgramError, match="buffer 3"):
        allocate_arenas([0, 32, 64], "m", [NonConstBufferDevice(3, DeviceType.CUDA, 0)])
    # A CPU entry changes nothing.
    arenas = allocate_arenas([0, 32], "m", [NonConstBufferDevice(1, DeviceType.CPU, 0)])
    assert arenas[1].size == 32


def test_allocator_returning_too_little_is_refused():
    class Stingy(DeviceAllocator):
        def device_type(self):
            return DeviceType.CUDA

        def allocate(self, nbytes, index, alignment=16):
            return np.zeros(nbytes // 2, np.uint8)

    register_device_allocator(Stingy())
    try:
        with pytest.raises(MemoryAllocationError, match="returned no usable buffer"):
            allocate_arenas([0, 32, 64], "m", CUDA_BUFFER_2)
    finally:
        unregister_device_allocator(DeviceType.CUDA)


def test_registry_rules(cuda):
    assert get_device_allocator(DeviceType.CUDA) is cuda
    assert get_device_allocator(99) is None  # a device type this schema does not know
    with pytest.raises(InvalidArgumentError, match="already registered for CUDA"):
        register_device_allocator(HostDeviceAllocator(DeviceType.CUDA))
    with pytest.raises(InvalidArgumentError, match="non-CPU"):
        register_device_allocator(HostDeviceAllocator(DeviceType.CPU))
