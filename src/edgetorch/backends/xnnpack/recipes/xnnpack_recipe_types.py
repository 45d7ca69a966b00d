"""XNNPACK recipe types (ExecuTorch 1.5's names and values)."""

from __future__ import annotations

from ....export import RecipeType


class XNNPackRecipeType(RecipeType):
    FP32 = "xnnpack_fp32"
    # PT2E quantization with the XNNPACK quantizer (static ones calibrate on the example inputs)
    PT2E_INT8_DYNAMIC_PER_CHANNEL = "xnnpack_pt2e_int8_dynamic_per_channel"
    PT2E_INT8_STATIC_PER_CHANNEL = "xnnpack_pt2e_int8_static_per_channel"
    PT2E_INT8_STATIC_PER_TENSOR = "xnnpack_pt2e_int8_static_per_tensor"
    # torchao: int8 dynamic activations, int4 weights per channel / per group (group_size=32)
    TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL = "xnnpack_torchao_int8da_int4w_per_channel"
    TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR = "xnnpack_torchao_int8da_int4w_per_tensor"

    @classmethod
    def get_backend_name(cls) -> str:
        return "xnnpack"
