"""``XNNPACKRecipeProvider``: the XNNPACK export recipes (ExecuTorch 1.5's provider).

Every recipe lowers with ``XnnpackPartitioner`` and XNNPACK's edge/backend configs; the
quantized ones quantize first with edgetorch's XNNPACK quantizer (PT2E) or torchao's
``Int8DynamicActivationIntxWeightConfig`` (8da4w), and raise ``FeatureNotAvailableError`` where
``edgetorch.backends.xnnpack.quantizer`` cannot be imported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ....errors import FeatureNotAvailableError
from ....export import (
    AOQuantizationConfig,
    BackendRecipeProvider,
    ExportRecipe,
    LoweringRecipe,
    QuantizationRecipe,
    RecipeType,
)
from ..partition.xnnpack_partitioner import XnnpackPartitioner
from ..utils.configs import get_xnnpack_edge_compile_config, get_xnnpack_executorch_backend_config
from .xnnpack_recipe_types import XNNPackRecipeType

logger = logging.getLogger(__name__)
T = XNNPackRecipeType

# recipe -> (per channel, dynamic) for the PT2E ones
_PT2E = {T.PT2E_INT8_DYNAMIC_PER_CHANNEL: (True, True),
         T.PT2E_INT8_STATIC_PER_CHANNEL: (True, False),
         T.PT2E_INT8_STATIC_PER_TENSOR: (False, False)}
_TORCHAO = {T.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL: True,
            T.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR: False}


def _xnnpack_quantizer() -> Any:
    try:
        from ..quantizer import xnnpack_quantizer
    except ImportError as e:
        raise FeatureNotAvailableError(
            "this XNNPACK recipe needs quantization support, which edgetorch does not have "
            f"yet (edgetorch.backends.xnnpack.quantizer: {e}); use XNNPackRecipeType.FP32") from e
    return xnnpack_quantizer


class XNNPACKRecipeProvider(BackendRecipeProvider):
    @property
    def backend_name(self) -> str:
        return "xnnpack"

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(XNNPackRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> ExportRecipe | None:
        if recipe_type not in self.get_supported_recipes():
            return None
        self._check_kwargs(recipe_type, kwargs)
        if recipe_type == T.FP32:
            return ExportRecipe(name=recipe_type.value, lowering_recipe=self._lowering(),
                                executorch_backend_config=get_xnnpack_executorch_backend_config())
        quantizer_module = _xnnpack_quantizer()
        if recipe_type in _PT2E:
            per_channel, dynamic = _PT2E[recipe_type]  # type: ignore[index]
            quantizer = quantizer_module.XNNPACKQuantizer()
            quantizer.set_global(quantizer_module.get_symmetric_quantization_config(
                is_per_channel=per_channel, is_dynamic=dynamic))
            return ExportRecipe(name=recipe_type.value,
                                quantization_recipe=QuantizationRecipe(quantizers=[quantizer]),
                                lowering_recipe=self._lowering(),
                                executorch_backend_config=get_xnnpack_executorch_backend_config())
        return self._torchao_recipe(recipe_type, _TORCHAO[recipe_type],  # type: ignore[index]
                                    int(kwargs.get("group_size", 32)))

    def _lowering(self) -> LoweringRecipe:
        # Every precision: ExecuTorch's provider passes its partitioner `precision_type=`, a
        # keyword the partitioner swallows in **kwargs, so its recipes delegate FP32 and
        # quantized patterns alike.
        return LoweringRecipe(partitioners=[XnnpackPartitioner()],
                              edge_compile_config=get_xnnpack_edge_compile_config())

    def _torchao_recipe(self, recipe_type: RecipeType, per_channel: bool, group_size: int
                        ) -> ExportRecipe:
        import torch
        from torchao.quantization.granularity import PerAxis, PerGroup
        from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig

        granularity = PerAxis(axis=0) if per_channel else PerGroup(group_size=group_size)
        config = AOQuantizationConfig(Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=granularity))
        return ExportRecipe(name=recipe_type.value,
                            quantization_recipe=QuantizationRecipe(ao_quantization_configs=[config]),
                            lowering_recipe=self._lowering(),
                            executorch_backend_config=get_xnnpack_executorch_backend_config())

    def _check_kwargs(self, recipe_type: RecipeType, kwargs: dict[str, Any]) -> None:
        expected = {"group_size"} if recipe_type == T.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR else set()
        unexpected = sorted(set(kwargs) - expected)
        if unexpected:
            logger.warning("XNNPACK recipe '%s' ignoring unexpected parameters: %s",
                           recipe_type.value, unexpected)
        if "group_size" in kwargs and "group_size" in expected and not isinstance(kwargs["group_size"], int):
            raise ValueError(f"Parameter 'group_size' must be an integer, got "
                             f"{type(kwargs['group_size']).__name__}: {kwargs['group_size']}")
