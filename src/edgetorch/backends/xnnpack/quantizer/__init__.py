"""XNNPACK's PT2E quantizer (ExecuTorch's ``backends.xnnpack.quantizer``), built on torchao."""

from .xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config"]
