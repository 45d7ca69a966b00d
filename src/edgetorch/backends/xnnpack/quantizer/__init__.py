"""XNNPACK's PT2E quantizer (ExecuTorch's ``backends.xnnpack.quantizer``), built on torchao."""

from ....exir.foreign_warnings import import_torchao

import_torchao()  # before the modules below import it, without its import-time noise

from .xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config  # noqa: E402

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config"]
