"""``cortex_m::quantize_per_tensor.out`` / ``cortex_m::dequantize_per_tensor.out``.

ExecuTorch's ``aot_arm_compiler`` rewrites the CPU-side quantize/dequantize around an Ethos-U
delegate into these CMSIS-NN ops (``ReplaceQuantNodesPass``); registering them lets its ``.pte``
files run here. Same schemas and semantics as the ``quantized_decomposed`` ops (dequantize has
no ``out_dtype``: float32 out); ExecuTorch's scalar loops compute exactly that
(``zp + nearbyint(x * (1.0f / scale))`` in float32, and ``(q - zp) * (float)scale``), only
int8 and int16.
"""

from __future__ import annotations

from ..quantized import qdq
from ..registry import kernel


@kernel("cortex_m::quantize_per_tensor.out")
def cortex_m_quantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    return qdq.quantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out)


@kernel("cortex_m::dequantize_per_tensor.out")
def cortex_m_dequantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype,
                                       out):
    return qdq.dequantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype,
                                         None, out)
