"""A demo backend: the worked example of ``docs/writing-a-backend.md``.

``BackendWithCompilerDemo`` compiles float32 elementwise math, ``mm`` and ``linear`` to a
small JSON program; ``DemoPartitioner`` picks those nodes. The runtime half
(``edgetorch.backends.demo.runtime``) interprets the JSON with NumPy and needs no torch.
``ExecutorBackend`` (ExecuTorch's test backend) delegates a subgraph as a whole nested
``.pte`` (``nested_runtime``).

Importing this package registers the runtime half; the compiler half (``BackendWithCompilerDemo``,
``DemoPartitioner``) is loaded on first use, so torch-free runtimes can import it too.
"""

from . import nested_runtime, runtime
from .runtime import BACKEND_ID

_COMPILER = ("AddMulPartitionerDemo", "BackendWithCompilerDemo", "DemoPartitioner",
             "ExecutorBackend", "SUPPORTED_OPS")
__all__ = ["BACKEND_ID", *_COMPILER, "nested_runtime", "runtime"]


def __getattr__(name: str):
    if name in _COMPILER:
        from . import compiler

        return getattr(compiler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
