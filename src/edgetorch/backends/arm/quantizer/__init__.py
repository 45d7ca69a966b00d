"""PT2E quantizers for the Arm backends (ExecuTorch 1.5.1's names)."""

from .arm_quantizer import EthosUQuantizer, TOSAQuantizer
from .quantization_config import get_symmetric_quantization_config

__all__ = ["EthosUQuantizer", "TOSAQuantizer", "get_symmetric_quantization_config"]
