"""The torch-free runtime: load a ``.pte`` and execute its methods with NumPy kernels.

Imports only NumPy, flatbuffers and the standard library. ExecuTorch's Python API shape::

    runtime = Runtime.get()
    program = runtime.load_program("model.pte")
    method = program.load_method("forward")
    outputs = method.execute([x])
"""

from .. import kernels as _kernels  # noqa: F401  (registers the portable kernels)
from ..backends import builtin as _builtin_backends  # noqa: F401  (built-in backends: XNNPACK)
from .backends import BackendRegistry, backend, register_backend
from .device_allocator import (
    DeviceAllocator,
    HostDeviceAllocator,
    get_device_allocator,
    register_device_allocator,
    unregister_device_allocator,
)
from .event_tracer import EventTracer, RecordingEventTracer
from .meta import MethodMeta, TensorInfo
from .method import Method
from .program import Program
from .runtime import OperatorRegistry, Runtime, Verification

__all__ = [
    "BackendRegistry",
    "DeviceAllocator",
    "EventTracer",
    "HostDeviceAllocator",
    "Method",
    "MethodMeta",
    "OperatorRegistry",
    "Program",
    "RecordingEventTracer",
    "Runtime",
    "TensorInfo",
    "Verification",
    "backend",
    "get_device_allocator",
    "register_backend",
    "register_device_allocator",
    "unregister_device_allocator",
]
