"""Dimension orders and quantize/dequantize operator sets the Arm backends share (ExecuTorch's
``backends/arm/constants`` names). A ``*_ORDER`` permutes a channels-first shape into the
channels-last one TOSA and the NPUs use; its ``*_INVERSE_ORDER`` permutes back."""

from __future__ import annotations

from typing import Final

from ...exir.dialects._ops import ops as exir_ops

_qd = exir_ops.edge.quantized_decomposed

QUANT_PER_TENSOR_OP: Final = _qd.quantize_per_tensor.default
QUANT_PER_TENSOR_OP_T: Final = _qd.quantize_per_tensor.tensor
QUANT_PER_CHANNEL_OP: Final = _qd.quantize_per_channel.default
DEQUANT_PER_TENSOR_OP: Final = _qd.dequantize_per_tensor.default
DEQUANT_PER_TENSOR_OP_T: Final = _qd.dequantize_per_tensor.tensor
DEQUANT_PER_CHANNEL_OP: Final = _qd.dequantize_per_channel.default

Q_OPS: Final = (QUANT_PER_TENSOR_OP, QUANT_PER_TENSOR_OP_T, QUANT_PER_CHANNEL_OP)
DQ_OPS: Final = (DEQUANT_PER_TENSOR_OP, DEQUANT_PER_TENSOR_OP_T, DEQUANT_PER_CHANNEL_OP)
PER_TENSOR_QDQ_OPS: Final = (QUANT_PER_TENSOR_OP, QUANT_PER_TENSOR_OP_T,
                             DEQUANT_PER_TENSOR_OP, DEQUANT_PER_TENSOR_OP_T)
PER_CHANNEL_QDQ_OPS: Final = (QUANT_PER_CHANNEL_OP, DEQUANT_PER_CHANNEL_OP)


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(order.index(i) for i in range(len(order)))


# channels moved last, with one, two or three leading batch-like dimensions
NHWC_ORDER: Final = (0, 2, 3, 1)
NNHWC_ORDER: Final = (0, 1, 3, 4, 2)
NNNHWC_ORDER: Final = (0, 1, 2, 4, 5, 3)
NHWC_INVERSE_ORDER: Final = _inverse(NHWC_ORDER)
NNHWC_INVERSE_ORDER: Final = _inverse(NNHWC_ORDER)
NNNHWC_INVERSE_ORDER: Final = _inverse(NNNHWC_ORDER)

NCHW_ORDER: Final = (0, 1, 2, 3)
NNCHW_ORDER: Final = (0, 1, 2, 3, 4)
NNNCHW_ORDER: Final = (0, 1, 2, 3, 4, 5)

# convolution weights: OIHW -> OHWI (and OIDHW -> ODHWI), depthwise OIHW -> HWCM
OHWI_ORDER: Final = (1, 2, 3, 0)
ODHWI_ORDER: Final = (0, 2, 3, 4, 1)
ODHWI_INVERSE_ORDER: Final = _inverse(ODHWI_ORDER)
HWCM_ORDER: Final = (2, 3, 0, 1)

MAX_RANK: Final = 6
