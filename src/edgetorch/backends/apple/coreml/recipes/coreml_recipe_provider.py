"""``CoreMLRecipeProvider``: the Core ML export recipes (ExecuTorch 1.5.1's provider).

Each recipe lowers with ``CoreMLPartitioner`` under compile specs from its parameters; the
quantized ones quantize first: PT2E with ``CoreMLQuantizer`` (coremltools' linear quantizer
config, symmetric int8 per-channel weights), or torchao's ``IntxWeightOnlyConfig`` /
``CodebookWeightOnlyConfig``. Quantized weights need a newer Core ML than float ones, so each
quantized recipe sets the deployment target to its minimum (iOS17 for PT2E, iOS18 for
torchao's per-group and int4 and for codebooks, iOS16 for torchao int8 per channel) and
refuses a lower one given explicitly; a higher one given is lowered to that minimum, as
ExecuTorch's provider does (so both write the same delegate).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import coremltools as ct
import torch

from .....errors import CompileSpecError
from .....exir import EdgeCompileConfig
from .....export import (
    AOQuantizationConfig,
    BackendRecipeProvider,
    ExportRecipe,
    LoweringRecipe,
    QuantizationRecipe,
    RecipeType,
)
from ..compiler import CoreMLBackend
from ..partition import CoreMLPartitioner
from .coreml_recipe_types import COREML_BACKEND, CoreMLRecipeType

logger = logging.getLogger(__name__)
T = CoreMLRecipeType

_COMMON = {"minimum_deployment_target", "compute_unit", "skip_ops_for_coreml_delegation",
           "lower_full_graph", "take_over_constant_data"}
_PER_GROUP = (T.TORCHAO_INT4_WEIGHT_ONLY_PER_GROUP, T.TORCHAO_INT8_WEIGHT_ONLY_PER_GROUP)
_PER_CHANNEL = (T.TORCHAO_INT4_WEIGHT_ONLY_PER_CHANNEL, T.TORCHAO_INT8_WEIGHT_ONLY_PER_CHANNEL)
# torchao recipe -> (weight dtype, per channel, the oldest target that runs it)
_TORCHAO = {
    T.TORCHAO_INT4_WEIGHT_ONLY_PER_CHANNEL: (torch.int4, True, ct.target.iOS18),
    T.TORCHAO_INT4_WEIGHT_ONLY_PER_GROUP: (torch.int4, False, ct.target.iOS18),
    T.TORCHAO_INT8_WEIGHT_ONLY_PER_CHANNEL: (torch.int8, True, ct.target.iOS16),
    # iOS18 for int8 per group too (ExecuTorch's GH issue #13122)
    T.TORCHAO_INT8_WEIGHT_ONLY_PER_GROUP: (torch.int8, False, ct.target.iOS18),
}
# PT2E recipe -> activation dtype (float32: weights only)
_PT2E = {T.PT2E_INT8_STATIC: torch.quint8, T.PT2E_INT8_WEIGHT_ONLY: torch.float32}


def _linear_or_embedding(module: torch.nn.Module, fqn: str) -> bool:
    return isinstance(module, (torch.nn.Embedding, torch.nn.Linear))


class CoreMLRecipeProvider(BackendRecipeProvider):
    @property
    def backend_name(self) -> str:
        return COREML_BACKEND

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(CoreMLRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> ExportRecipe | None:
        if recipe_type not in self.get_supported_recipes():
            return None
        self._check_kwargs(recipe_type, kwargs)
        if recipe_type in (T.FP32, T.FP16):
            precision = ct.precision.FLOAT32 if recipe_type == T.FP32 else ct.precision.FLOAT16
            return ExportRecipe(name=recipe_type.value,
                                lowering_recipe=self._lowering(precision, kwargs))
        if recipe_type in _PT2E:
            return self._pt2e(recipe_type, _PT2E[recipe_type], kwargs)  # type: ignore[index]
        if recipe_type in _TORCHAO:
            dtype, per_channel, oldest = _TORCHAO[recipe_type]  # type: ignore[index]
            group_size = kwargs.pop("group_size", 32)
            _raise_target(kwargs, oldest, "torchao")
            from torchao.quantization.granularity import PerAxis, PerGroup
            from torchao.quantization.quant_api import IntxWeightOnlyConfig

            granularity = PerAxis(axis=0) if per_channel else PerGroup(group_size=group_size)
            config = AOQuantizationConfig(
                IntxWeightOnlyConfig(weight_dtype=dtype, granularity=granularity),
                filter_fn=kwargs.get("filter_fn"))
            return self._quantized(recipe_type, QuantizationRecipe(
                ao_quantization_configs=[config]), kwargs)
        return self._codebook(recipe_type, kwargs)

    def _pt2e(self, recipe_type: RecipeType, activation_dtype: torch.dtype,
              kwargs: dict[str, Any]) -> ExportRecipe:
        from ..quantizer import CoreMLQuantizer

        _raise_target(kwargs, ct.target.iOS17, "pt2e")
        q = ct.optimize.torch.quantization
        config = q.LinearQuantizerConfig(global_config=q.ModuleLinearQuantizerConfig(
            quantization_scheme="symmetric", activation_dtype=activation_dtype,
            weight_dtype=torch.qint8, weight_per_channel=True))
        return self._quantized(recipe_type, QuantizationRecipe(
            quantizers=[CoreMLQuantizer(config)]), kwargs)

    def _codebook(self, recipe_type: RecipeType, kwargs: dict[str, Any]) -> ExportRecipe:
        from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig

        bits, block_size = kwargs.pop("bits"), kwargs.pop("block_size")
        _raise_target(kwargs, ct.target.iOS18, "codebook")
        config = AOQuantizationConfig(
            CodebookWeightOnlyConfig(dtype=getattr(torch, f"uint{bits}"), block_size=block_size),
            filter_fn=kwargs.get("filter_fn", _linear_or_embedding))
        return self._quantized(recipe_type, QuantizationRecipe(
            ao_quantization_configs=[config]), kwargs)

    def _quantized(self, recipe_type: RecipeType, quantization: QuantizationRecipe,
                   kwargs: dict[str, Any]) -> ExportRecipe:
        return ExportRecipe(name=recipe_type.value, quantization_recipe=quantization,
                            lowering_recipe=self._lowering(ct.precision.FLOAT16, kwargs))

    def _lowering(self, precision: ct.precision, kwargs: dict[str, Any]) -> LoweringRecipe:
        target = kwargs.get("minimum_deployment_target")
        specs = CoreMLBackend.generate_compile_specs(
            compute_precision=precision,
            compute_unit=kwargs.get("compute_unit", ct.ComputeUnit.ALL),
            minimum_deployment_target=target)
        # Core ML keeps state (a mutable buffer) from iOS18 on; before, the program keeps it.
        partitioner = CoreMLPartitioner(
            compile_specs=specs,
            take_over_mutable_buffer=not (target and target < ct.target.iOS18),
            skip_ops_for_coreml_delegation=kwargs.get("skip_ops_for_coreml_delegation"),
            lower_full_graph=kwargs.get("lower_full_graph", False),
            take_over_constant_data=kwargs.get("take_over_constant_data", True))
        return LoweringRecipe(partitioners=[partitioner], edge_compile_config=EdgeCompileConfig(
            _check_ir_validity=False, _skip_dim_order=False))

    def _check_kwargs(self, recipe_type: RecipeType, kwargs: dict[str, Any]) -> None:
        expected = set(_COMMON)
        if recipe_type in _PER_GROUP:
            expected |= {"group_size", "filter_fn"}
        elif recipe_type in _PER_CHANNEL:
            expected |= {"filter_fn"}
        elif recipe_type == T.CODEBOOK_WEIGHT_ONLY:
            expected |= {"bits", "block_size", "filter_fn"}
        unexpected = sorted(set(kwargs) - expected)
        if unexpected:
            logger.warning("Core ML recipe '%s' ignoring unexpected parameters: %s (expected: "
                           "%s)", recipe_type.value, unexpected, sorted(expected))
        target = kwargs.get("minimum_deployment_target")
        if target is not None and not isinstance(target, ct.target):
            raise CompileSpecError("Parameter 'minimum_deployment_target' must be an enum of "
                                   f"type ct.target, got {type(target)}")
        unit = kwargs.get("compute_unit")
        if unit is not None and not isinstance(unit, ct.ComputeUnit):
            raise CompileSpecError("Parameter 'compute_unit' must be an enum of type "
                                   f"ct.ComputeUnit, got {type(unit)}")
        if recipe_type in _PER_GROUP and "group_size" in kwargs:
            _check_int(kwargs["group_size"], "group_size")
            if kwargs["group_size"] <= 0:
                raise CompileSpecError("Parameter 'group_size' must be positive, got: "
                                       f"{kwargs['group_size']}")
        if recipe_type == T.CODEBOOK_WEIGHT_ONLY:
            if "bits" not in kwargs or "block_size" not in kwargs:
                raise CompileSpecError("Parameters 'bits' and 'block_size' must be present for "
                                       "codebook recipes")
            _check_int(kwargs["bits"], "bits")
            if not 1 <= kwargs["bits"] <= 8:
                raise CompileSpecError(f"Parameter 'bits' must be between 1 and 8, got: "
                                       f"{kwargs['bits']}")
            if not isinstance(kwargs["block_size"], list):
                raise CompileSpecError("Parameter 'block_size' must be a list, got "
                                       f"{type(kwargs['block_size']).__name__}: "
                                       f"{kwargs['block_size']}")


def _check_int(value: Any, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CompileSpecError(f"Parameter '{name}' must be an integer, got "
                               f"{type(value).__name__}: {value}")


def _raise_target(kwargs: dict[str, Any], oldest: ct.target, kind: str) -> None:
    """The deployment target becomes ``oldest``; an older one given is refused."""
    target = kwargs.get("minimum_deployment_target")
    if target and target < oldest:
        raise CompileSpecError(f"minimum_deployment_target must be {oldest} or higher "
                               f"({oldest.name}) for {kind} quantization, got {target.name}")
    kwargs["minimum_deployment_target"] = oldest
