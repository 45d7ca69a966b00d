"""The XNNPACK backend: ExecuTorch's XNNPACK delegate format and a NumPy runtime for it.

Importing this package registers the runtime backend under ``"XnnpackBackend"`` (the id
ExecuTorch stores in a ``.pte``), so programs lowered to XNNPACK by ExecuTorch 1.5 run in
``edgetorch.runtime``. Torch-free: only the runtime side is imported here.
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

__all__ = [
    "BACKEND_ID",
    "CompiledGraph",
    "XNNHeader",
    "XnnpackBackend",
    "XnnpackBlob",
    "deserialize_xnnpack_binary",
    "serialize_xnnpack_binary",
    "xnngraph_from_flatbuffer",
    "xnngraph_to_flatbuffer",
]
