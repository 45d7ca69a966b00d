"""``CortexMQuantizer`` and its configs (ExecuTorch's ``backends/cortex_m/quantizer``)."""

from .quantization_configs import (
    INT8_PER_CHANNEL_CONFIG,
    INT8_PER_TENSOR_CONFIG,
    INT16_PER_TENSOR_CONFIG,
    SOFTMAX_OUTPUT_FIXED_QSPEC,
    CortexMQuantizationConfig,
)
from .quantizer import CortexMQuantizer

__all__ = ["INT8_PER_CHANNEL_CONFIG", "INT8_PER_TENSOR_CONFIG", "INT16_PER_TENSOR_CONFIG",
           "SOFTMAX_OUTPUT_FIXED_QSPEC", "CortexMQuantizationConfig", "CortexMQuantizer"]
