"""The OpenVINO backend, at ExecuTorch 1.5.1's names (``executorch.backends.openvino``).

Compiler half (torch, openvino; loaded on first use of its names): ``OpenvinoPartitioner``,
``OpenvinoBackend`` (the ``BackendDetails`` whose ``preprocess`` compiles with OpenVINO),
``OpenVINOQuantizer`` / ``QuantizationMode`` / ``quantize_model`` (NNCF). Runtime half
(numpy + openvino, the ``edgetorch[openvino]`` extra): ``runtime.OpenvinoBackend``, registered
under ``"OpenvinoBackend"`` by ``edgetorch.backends.builtin``, so ExecuTorch's ``.pte`` files
delegating to OpenVINO load with no extra import. Importing this package imports neither torch
nor openvino.
"""

from . import runtime
from .options import CACHE_DIR, DEVICE, INFERENCE_PRECISION, OpenvinoOptions, parse_options
from .runtime import BACKEND_ID

_COMPILER = {
    "OpenvinoPartitioner": "partitioner",
    "OpenvinoBackend": "preprocess",
    "OpenVINOQuantizer": "quantizer",
    "QuantizationMode": "quantizer",
    "quantize_model": "quantizer",
}

__all__ = ["BACKEND_ID", "CACHE_DIR", "DEVICE", "INFERENCE_PRECISION", "OpenvinoOptions",
           "parse_options", "runtime", *_COMPILER]


def __getattr__(name: str):
    if name in _COMPILER:
        import importlib

        return getattr(importlib.import_module(f".{_COMPILER[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
