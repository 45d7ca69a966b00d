"""The XNNPACK backend: ExecuTorch's XNNPACK delegate format and a NumPy runtime for it.

Importing this package registers the runtime backend under ``"XnnpackBackend"`` (the id
ExecuTorch stores in a ``.pte``), so programs lowered to XNNPACK by ExecuTorch 1.5 run in
``edgetorch.runtime``. Torch-free: only the runtime side is imported here; the compiler side
(``XnnpackPartitioner``, and ``xnnpack_preprocess.XnnpackBackend``, the ``BackendDetails``)
loads on first use of those names.
"""

from ...runtime.backends import register_backend
from .runtime import CompiledGraph, XnnpackBackend
from .serialization import (
    XNNHeader,
    XnnpackBlob,
    deserialize_xnnpack_binary,
    serialize_xnnpack_binary,
    xnngraph_from_flatbuffer,
    xnngraph_to_flatbuffer,
)

BACKEND_ID = "XnnpackBackend"

register_backend(BACKEND_ID, XnnpackBackend())

_COMPILER = {"XnnpackPartitioner": "partition", "ConfigPrecisionType": "partition"}


def __getattr__(name: str):
    if name in _COMPILER:
        import importlib

        return getattr(importlib.import_module(f".{_COMPILER[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKEND_ID",
    "ConfigPrecisionType",
    "XnnpackPartitioner",
    "CompiledGraph",
    "XNNHeader",
    "XnnpackBackend",
    "XnnpackBlob",
    "deserialize_xnnpack_binary",
    "serialize_xnnpack_binary",
    "xnngraph_from_flatbuffer",
    "xnngraph_to_flatbuffer",
]
