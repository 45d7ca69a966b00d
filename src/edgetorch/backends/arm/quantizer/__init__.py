"""PT2E quantizers for the Arm backends (ExecuTorch 1.5.1's names)."""

from ....exir.foreign_warnings import import_torchao

import_torchao()  # before the modules below import it, without its import-time noise

from .arm_quantizer import EthosUQuantizer, TOSAQuantizer, VgfQuantizer  # noqa: E402
from .quantization_config import (  # noqa: E402
    get_symmetric_a8w4_quantization_config,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)

__all__ = ["EthosUQuantizer", "TOSAQuantizer", "VgfQuantizer",
           "get_symmetric_a8w4_quantization_config", "get_symmetric_a16w8_quantization_config",
           "get_symmetric_quantization_config"]
