"""The runtime half of the Core ML backend: ``interpreter.CoreMLBackend``, a NumPy interpreter
of the ML program in the delegate, registered under ``"CoreMLBackend"`` (torch-free, no
coremltools, no protobuf package)."""

from .....runtime.backends import register_backend
from .interpreter import BACKEND_ID, CoreMLBackend, CoreMLDelegate

register_backend(BACKEND_ID, CoreMLBackend())

__all__ = ["BACKEND_ID", "CoreMLBackend", "CoreMLDelegate"]
