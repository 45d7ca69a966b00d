"""The Core ML backend, at ExecuTorch 1.5.1's names (``executorch.backends.apple.coreml``).

Compiler half (torch + coremltools, the ``coreml`` extra): ``partition.CoreMLPartitioner``,
``compiler.CoreMLBackend`` (the ``BackendDetails``), ``quantizer.CoreMLQuantizer``
(coremltools' PT2E quantizer on torchao; see docs/coreml.md). Runtime
half (NumPy): an interpreter of the ML program inside the delegate, registered under
``"CoreMLBackend"`` by ``edgetorch.backends.builtin``. Importing this package imports
neither torch nor coremltools.
"""

from . import inmemoryfs, runtime
from .runtime import BACKEND_ID

__all__ = ["BACKEND_ID", "inmemoryfs", "runtime"]
