"""Core ML recipe types (ExecuTorch 1.5.1's names and values).

Every recipe takes ``minimum_deployment_target`` and ``compute_unit`` (coremltools enums) and
the partitioner's ``skip_ops_for_coreml_delegation``, ``lower_full_graph``,
``take_over_constant_data``; the torchao ones also ``filter_fn`` (which modules to quantize),
the per-group ones ``group_size`` (default 32), the codebook one ``bits`` (1-8) and
``block_size`` (a list), both required.
"""

from __future__ import annotations

from .....export import RecipeType

COREML_BACKEND = "coreml"


class CoreMLRecipeType(RecipeType):
    FP32 = "coreml_fp32"
    FP16 = "coreml_fp16"
    # PT2E with CoreMLQuantizer: int8 weights and activations (calibrated), or int8 weights only
    PT2E_INT8_STATIC = "coreml_pt2e_int8_static"
    PT2E_INT8_WEIGHT_ONLY = "coreml_pt2e_int8_weight_only"
    # torchao IntxWeightOnlyConfig: per channel (axis 0) or per group
    TORCHAO_INT4_WEIGHT_ONLY_PER_CHANNEL = "coreml_torchao_int4_weight_only_per_channel"
    TORCHAO_INT4_WEIGHT_ONLY_PER_GROUP = "coreml_torchao_int4_weight_only_per_group"
    TORCHAO_INT8_WEIGHT_ONLY_PER_CHANNEL = "coreml_torchao_int8_weight_only_per_channel"
    TORCHAO_INT8_WEIGHT_ONLY_PER_GROUP = "coreml_torchao_int8_weight_only_per_group"
    # torchao's CodebookWeightOnlyConfig (palettization)
    CODEBOOK_WEIGHT_ONLY = "coreml_codebook_weight_only"

    @classmethod
    def get_backend_name(cls) -> str:
        return COREML_BACKEND
