"""The stages an ``ExportSession`` runs (ExecuTorch 1.5's ``executorch.export.stages``).

A stage turns one ``PipelineArtifact`` into the next: ``{method: nn.Module}`` -> (source
transform, PT2E quantization) -> ``{method: ExportedProgram}`` -> ``EdgeProgramManager`` ->
``ExecutorchProgramManager``. Each says what it is (``stage_type``), which stages may come
right before it and whether it may come first; the session checks a pipeline against that
before it runs anything. A stage with nothing to do (no quantizers, no passes) hands its
input on unchanged, so a recipe's default pipeline can always list it.
"""

from __future__ import annotations

import copy
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

import torch
from torch.fx.passes.infra.pass_manager import PassManager as GraphModulePassManager

from ..exir.foreign_warnings import import_torchao

import_torchao()  # before the imports below, without its import-time noise

from torchao.quantization import quantize_  # noqa: E402
from torchao.quantization.pt2e import (  # noqa: E402  (PT2E's train/inference mode switches)
    allow_exported_model_train_eval as allow_mode_switching,
)
from torchao.quantization.pt2e import (  # noqa: E402
    move_exported_model_to_eval as move_exported_model_to_inference,
)
from torchao.quantization.pt2e import move_exported_model_to_train  # noqa: E402
from torchao.quantization.pt2e.quantize_pt2e import (  # noqa: E402
    convert_pt2e,
    prepare_pt2e,
    prepare_qat_pt2e,
)
from torchao.quantization.pt2e.quantizer import ComposableQuantizer  # noqa: E402
from torchao.quantization.pt2e.quantizer import Quantizer as TorchAOPT2EQuantizer  # noqa: E402
from torchao.utils import unwrap_tensor_subclass  # noqa: E402

from ..devtools.backend_debug import get_delegation_info  # noqa: E402
from ..errors import PassError  # noqa: E402
from ..exir import EdgeProgramManager, to_edge, to_edge_transform_and_lower  # noqa: E402
from ..exir.backend.backend_api import validation_disabled  # noqa: E402
from ..exir.torch_export import export_program  # noqa: E402
from ..extension.export_util.utils import save_pte_program  # noqa: E402
from .recipe import LoweringRecipe, QuantizationRecipe  # noqa: E402
from .types import StageType  # noqa: E402

logger = logging.getLogger(__name__)


@dataclass
class PipelineArtifact:
    """What a stage produced (``data``) and what the run knows (``context``: the example
    inputs, dynamic shapes, constant methods, session name, ``duration_ms``...)."""

    data: Any
    context: dict[str, Any] = field(default_factory=dict)

    def get_context(self, key: str, default: Any = None) -> Any:
        return self.context.get(key, default)

    def add_context(self, key: str, value: Any) -> None:
        self.context[key] = value

    def copy_with_new_data(self, new_data: Any) -> PipelineArtifact:
        """The next stage's artifact: ``new_data`` with a copy of this context."""
        return PipelineArtifact(new_data, dict(self.context))


class Stage(ABC):
    """One step of an export pipeline. ``run(artifact)`` keeps its result, which
    ``get_artifacts()`` returns. ``valid_predecessor_stages`` empty: any stage may precede."""

    def __init__(self) -> None:
        self._artifact: PipelineArtifact | None = None

    @property
    @abstractmethod
    def stage_type(self) -> StageType:
        """Which stage this is (its key in a session's registry and pipeline)."""

    @property
    @abstractmethod
    def valid_predecessor_stages(self) -> list[StageType]:
        """The stages that may run right before this one."""

    @property
    @abstractmethod
    def can_start_pipeline(self) -> bool:
        """Whether this stage may run first."""

    @abstractmethod
    def run(self, artifact: PipelineArtifact) -> None:
        """Run on ``artifact`` (the previous stage's, or the session's model and context)."""

    def get_artifacts(self) -> PipelineArtifact:
        if self._artifact is None:
            raise RuntimeError(f"Stage: {type(self).__name__} not executed; call run() first")
        return self._artifact


class _Builtin(Stage):
    """edgetorch's own stages: what each is, which may precede it and whether it may come
    first, as class attributes (``TYPE``, ``AFTER``, ``FIRST``)."""

    TYPE: StageType
    AFTER: tuple[StageType, ...] = ()
    FIRST = False

    @property
    def stage_type(self) -> StageType:
        return self.TYPE

    @property
    def valid_predecessor_stages(self) -> list[StageType]:
        return list(self.AFTER)

    @property
    def can_start_pipeline(self) -> bool:
        return self.FIRST


def _example_inputs(artifact: PipelineArtifact, method: str) -> list[tuple]:
    samples = (artifact.get_context("example_inputs") or {}).get(method)
    if not samples:
        raise ValueError(f"Example inputs for method {method} not found or empty.")
    return list(samples)


# ---- nn.Module stages -----------------------------------------------------------------------


class SourceTransformStage(_Builtin):
    """torchao's ``quantize_`` with the recipe's one ``AOQuantizationConfig``, on a copy of each
    model (or on the model itself, ``in_place=True``, for models too large to copy)."""

    def __init__(self, quantization_recipe: QuantizationRecipe | None,
                 in_place: bool = False) -> None:
        super().__init__()
        self._quantization_recipe = quantization_recipe
        self._in_place = in_place

    TYPE = StageType.SOURCE_TRANSFORM
    AFTER = ()
    FIRST = True

    def run(self, artifact: PipelineArtifact) -> None:
        recipe = self._quantization_recipe
        if not recipe or not recipe.ao_quantization_configs:
            logger.info("No torchao configs in the quantization recipe: source transform skipped")
            self._artifact = artifact.copy_with_new_data(artifact.data)
            return
        if len(recipe.ao_quantization_configs) > 1:
            raise ValueError("AO quantization configs cannot be reliably composed together, "
                             "multiple quantization configs are disallowed for source transform "
                             "at this point; give the recipe one AOQuantizationConfig")
        config = recipe.ao_quantization_configs[0]
        models = artifact.data if self._in_place else copy.deepcopy(artifact.data)
        for model in models.values():
            quantize_(model, config.ao_base_config, config.filter_fn)
            unwrap_tensor_subclass(model)
        self._artifact = artifact.copy_with_new_data(models)


class QuantizeStage(_Builtin):
    """PT2E quantization of each model: capture (``torch.export``), ``prepare_pt2e`` (or
    ``prepare_qat_pt2e`` and the recipe's ``train_fn``), calibration on the example inputs (or
    the recipe's ``calibration_inputs_fn``), ``convert_pt2e``; the recipe's graph passes run
    before and after prepare and convert. The capture uses the session's dynamic shapes, or a
    dynamic batch dimension when the recipe asks for one."""

    def __init__(self, quantization_recipe: QuantizationRecipe | None,
                 strict: bool = True) -> None:
        super().__init__()
        self._quantization_recipe = quantization_recipe
        self._strict = strict

    TYPE = StageType.QUANTIZE
    AFTER = (StageType.SOURCE_TRANSFORM,)
    FIRST = True

    def _get_quantizer_for_prepare_pt2e(self, quantizers: list[Any]) -> Any:
        """torchao quantizers composed into one; a single torch.ao quantizer as it is."""
        torchao = [q for q in quantizers if isinstance(q, TorchAOPT2EQuantizer)]
        legacy = [q for q in quantizers if not isinstance(q, TorchAOPT2EQuantizer)]
        for q in legacy:
            logger.warning("torch.ao quantizer %s is deprecated, consider moving to torchao "
                           "quantizer", q)
        if torchao and legacy:
            raise ValueError("Mixed quantizer types are not supported: give torchao "
                             "quantizers only")
        if len(legacy) > 1:
            raise ValueError("Multiple quantizers of torch.ao.quantization.quantizer not "
                             "supported")
        if legacy:
            return legacy[0]
        if torchao:
            return ComposableQuantizer(torchao)
        raise ValueError("No quantizers detected in the quantization recipe")

    def run(self, artifact: PipelineArtifact) -> None:
        recipe = self._quantization_recipe
        if not recipe or not recipe.quantizers:
            logger.info("No quantizers in the quantization recipe: quantize stage skipped")
            self._artifact = artifact.copy_with_new_data(artifact.data)
            return
        dynamic_shapes = artifact.get_context("dynamic_shapes") or {}
        quantized = {}
        for method, model in artifact.data.items():
            samples = _example_inputs(artifact, method)
            quantized[method] = self._quantize(model, samples, dynamic_shapes.get(method))
        self._artifact = artifact.copy_with_new_data(quantized)

    def _quantize(self, model: Any, samples: list[tuple], dynamic_shapes: Any) -> Any:
        recipe = self._quantization_recipe
        assert recipe is not None
        inputs = tuple(samples[0])
        if recipe.dynamic_batch_size:  # a QAT loop may feed mini-batches of any size
            batch = torch.export.Dim("batch", min=1)
            dynamic_shapes = tuple({0: batch} if isinstance(t, torch.Tensor) else None
                                   for t in inputs)
        if recipe.is_qat:  # batch norm and dropout captured with training semantics
            model.train()
        kwargs = {"dynamic_shapes": dynamic_shapes} if dynamic_shapes is not None else {}
        gm = export_program(model, inputs, strict=self._strict, **kwargs).module()
        gm = _apply(gm, recipe.pre_prepare_passes)
        quantizer = self._get_quantizer_for_prepare_pt2e(recipe.quantizers)
        if recipe.is_qat:
            if recipe.train_fn is None:
                raise ValueError("train_fn must be provided when is_qat=True")
            gm = _apply(prepare_qat_pt2e(gm, quantizer), recipe.post_prepare_passes)
            allow_mode_switching(gm)
            move_exported_model_to_train(gm)
            recipe.train_fn(gm)
            move_exported_model_to_inference(gm)
        else:
            gm = _apply(prepare_pt2e(gm, quantizer), recipe.post_prepare_passes)
            calibration = (recipe.calibration_inputs_fn() if recipe.calibration_inputs_fn
                           is not None else samples)
            for sample in calibration:
                gm(*sample)
        gm = convert_pt2e(_apply(gm, recipe.pre_convert_passes))
        return _apply(gm, recipe.post_convert_passes)


def _apply(gm: Any, passes: list[Callable[[Any], Any]] | None) -> Any:
    for graph_pass in passes or []:
        try:
            gm = graph_pass(gm)
        except Exception as e:
            raise PassError(f"QuantizeStage: pass {graph_pass!r} raised {type(e).__name__}: "
                            f"{e}") from e
    return gm


class TorchExportStage(_Builtin):
    """``torch.export`` of each model on its first example input, then the recipe's ATen
    passes (each ``(method_name, ExportedProgram) -> ExportedProgram``).

    Unlike ExecuTorch's stage, the export does not run under ``torch.no_grad()``: there,
    ``nn.TransformerEncoderLayer`` and ``nn.MultiheadAttention`` in eval mode take their fused
    fast paths (``aten::_transformer_encoder_layer_fwd``), which no runtime has a kernel for."""

    def __init__(self, aten_transform_passes: list[Callable[[str, Any], Any]] | None = None,
                 strict: bool = True) -> None:
        super().__init__()
        self._aten_transform_passes = aten_transform_passes
        self.strict = strict

    TYPE = StageType.TORCH_EXPORT
    AFTER = (StageType.SOURCE_TRANSFORM, StageType.QUANTIZE)
    FIRST = True

    def run(self, artifact: PipelineArtifact) -> None:
        dynamic_shapes = artifact.get_context("dynamic_shapes") or {}
        programs = {}
        for method, model in artifact.data.items():
            inputs = tuple(_example_inputs(artifact, method)[0])
            ep = export_program(model, inputs, dynamic_shapes=dynamic_shapes.get(method),
                                strict=self.strict)
            for aten_pass in self._aten_transform_passes or []:
                if not callable(aten_pass):
                    raise ValueError("Aten transform passes must be a callable that can "
                                     f"transform and return an exported program, got "
                                     f"{aten_pass!r}")
                ep = aten_pass(method, ep)
            programs[method] = ep
        self._artifact = artifact.copy_with_new_data(programs)


# ---- Edge stages ----------------------------------------------------------------------------


def _resolve_passes(makers: list[Callable[[str, Any], Any]] | None,
                    programs: dict[str, Any]) -> Any:
    """Each maker ``(method, program) -> [passes] | PassManager``, for every method: ``{method:
    [passes]}`` (methods without passes left out), a ``PassManager`` one returned (it then
    runs on every method), or None when there is nothing to run."""
    by_method: dict[str, list[Any]] = {}
    for method, program in programs.items():
        for make in makers or []:
            if not callable(make):
                raise ValueError("Transform passes must be a callable that resolves to passes, "
                                 f"got {make!r}")
            passes = make(method, program)
            if isinstance(passes, GraphModulePassManager):
                return passes
            by_method.setdefault(method, []).extend(passes)
    return {m: ps for m, ps in by_method.items() if ps} or None


def _with_delegation_info(artifact: PipelineArtifact, edge: Any) -> PipelineArtifact:
    """``delegation_info_by_method`` and ``delegation_info`` (``forward``'s, else the first
    method's) in the artifact's context."""
    by_method = {m: get_delegation_info(edge.exported_program(m).graph_module)
                 for m in sorted(edge.methods)}
    artifact.add_context("delegation_info_by_method", by_method)
    artifact.add_context("delegation_info",
                         by_method.get("forward", next(iter(by_method.values()), None)))
    return artifact


class _Lowering(_Builtin):
    """A stage whose artifact carries delegation info."""

    @property
    def delegation_info(self) -> Any:
        return self.get_artifacts().get_context("delegation_info")

    @property
    def delegation_info_by_method(self) -> dict[str, Any]:
        return self.get_artifacts().get_context("delegation_info_by_method")


class EdgeTransformAndLowerStage(_Lowering):
    """``to_edge_transform_and_lower``: Edge dialect, the recipe's Edge passes, partitioners."""

    def __init__(self, partitioners: list[Any] | dict[str, list[Any]] | None = None,
                 transform_passes: list[Callable[[str, Any], Any]] | None = None,
                 compile_config: Any = None) -> None:
        super().__init__()
        self._partitioners = partitioners
        self._transform_passes = transform_passes
        self._compile_config = compile_config

    @classmethod
    def from_recipe(cls, lowering_recipe: LoweringRecipe | None) -> EdgeTransformAndLowerStage:
        if lowering_recipe is None:
            return cls()
        return cls(partitioners=lowering_recipe.partitioners,
                   transform_passes=lowering_recipe.edge_transform_passes,
                   compile_config=lowering_recipe.edge_compile_config)

    TYPE = StageType.TO_EDGE_TRANSFORM_AND_LOWER
    AFTER = (StageType.TORCH_EXPORT,)
    FIRST = True

    def run(self, artifact: PipelineArtifact) -> None:
        programs = artifact.data
        with validation_disabled():
            edge = to_edge_transform_and_lower(
                programs, partitioner=self._partitioners,
                transform_passes=_resolve_passes(self._transform_passes, programs),
                constant_methods=artifact.get_context("constant_methods"),
                compile_config=self._compile_config,
                generate_etrecord=artifact.get_context("generate_etrecord", False))
        self._artifact = _with_delegation_info(artifact.copy_with_new_data(edge), edge)


class ToEdgeStage(_Builtin):
    """``to_edge``: the exported programs in the Edge dialect, verified."""

    def __init__(self, edge_compile_config: Any = None) -> None:
        super().__init__()
        self._edge_compile_config = edge_compile_config

    @classmethod
    def from_recipe(cls, lowering_recipe: LoweringRecipe | None) -> ToEdgeStage:
        if lowering_recipe is None:
            return cls()
        return cls(edge_compile_config=lowering_recipe.edge_compile_config)

    TYPE = StageType.TO_EDGE
    AFTER = (StageType.TORCH_EXPORT,)
    FIRST = True

    def run(self, artifact: PipelineArtifact) -> None:
        edge = to_edge(artifact.data, constant_methods=artifact.get_context("constant_methods"),
                       compile_config=self._edge_compile_config,
                       generate_etrecord=artifact.get_context("generate_etrecord", False))
        self._artifact = artifact.copy_with_new_data(edge)


class EdgeProgramManagerTransformStage(_Builtin):
    """Edge passes on an ``EdgeProgramManager``: the per-method ones (``(method, program) ->
    passes``), then each ``edge_manager_transform_passes`` callable's (``manager -> passes``),
    one after the other, each seeing the manager the previous ones made."""

    def __init__(self, edge_transform_passes: list[Callable[[str, Any], Any]] | None = None,
                 edge_manager_transform_passes: list[Callable[[Any], Any]] | None = None
                 ) -> None:
        super().__init__()
        self._edge_transform_passes = edge_transform_passes or []
        self._edge_manager_transform_passes = edge_manager_transform_passes or []

    @classmethod
    def from_recipe(cls, lowering_recipe: LoweringRecipe | None
                    ) -> EdgeProgramManagerTransformStage:
        if lowering_recipe is None:
            return cls()
        return cls(edge_transform_passes=lowering_recipe.edge_transform_passes,
                   edge_manager_transform_passes=lowering_recipe.edge_manager_transform_passes)

    TYPE = StageType.EDGE_PROGRAM_MANAGER_TRANSFORM
    AFTER = (StageType.TO_EDGE, StageType.TO_EDGE_TRANSFORM_AND_LOWER)
    FIRST = False

    def run(self, artifact: PipelineArtifact) -> None:
        edge = artifact.data
        if not isinstance(edge, EdgeProgramManager):
            raise TypeError(f"Expected EdgeProgramManager but got {type(edge)}")
        programs = {m: edge.exported_program(m) for m in edge.methods}
        passes = _resolve_passes(self._edge_transform_passes, programs)
        if passes is not None:
            edge = edge.transform(passes)
        for make in self._edge_manager_transform_passes:
            manager_passes = make(edge)
            if manager_passes:
                edge = edge.transform(manager_passes)
        self._artifact = artifact.copy_with_new_data(edge)


class ToBackendStage(_Lowering):
    """``to_backend`` with each partitioner in turn (a list for every method, or ``{method:
    [...]}``: the i-th partitioners of all methods in one round)."""

    def __init__(self, partitioners: list[Any] | dict[str, list[Any]] | None = None) -> None:
        super().__init__()
        self._partitioners = partitioners

    @classmethod
    def from_recipe(cls, lowering_recipe: LoweringRecipe | None) -> ToBackendStage:
        if lowering_recipe is None:
            return cls()
        return cls(partitioners=lowering_recipe.partitioners)

    TYPE = StageType.TO_BACKEND
    AFTER = (StageType.TO_EDGE, StageType.EDGE_PROGRAM_MANAGER_TRANSFORM)
    FIRST = False

    def run(self, artifact: PipelineArtifact) -> None:
        edge = artifact.data
        if edge is None:
            raise RuntimeError("Edge program manager is not set.")
        with validation_disabled():
            for round_ in self._rounds():
                edge = edge.to_backend(round_)
        self._artifact = _with_delegation_info(artifact.copy_with_new_data(edge), edge)

    def _rounds(self) -> list[Any]:
        if isinstance(self._partitioners, dict):
            methods = list(self._partitioners)
            return [{m: p for m, p in zip(methods, ps) if p is not None}
                    for ps in zip_longest(*self._partitioners.values())]
        return list(self._partitioners or [])


class ExecutorchStage(_Builtin):
    """``to_executorch`` with the recipe's ``ExecutorchBackendConfig``; the ``.pte`` is also
    saved in the session's ``artifact_dir`` when it has one."""

    def __init__(self, backend_config: Any) -> None:
        super().__init__()
        self._backend_config = backend_config

    TYPE = StageType.TO_EXECUTORCH
    # TO_EDGE too (ExecuTorch's list lacks it): to_edge -> to_executorch is the plain flow
    AFTER = (StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.TO_BACKEND,
             StageType.EDGE_PROGRAM_MANAGER_TRANSFORM, StageType.TO_EDGE)
    FIRST = False

    def run(self, artifact: PipelineArtifact) -> None:
        edge = artifact.data
        if edge is None:
            raise RuntimeError("Edge program manager is not set.")
        program = edge.to_executorch(self._backend_config)
        artifact_dir = artifact.get_context("artifact_dir")
        if artifact_dir:
            save_pte_program(program, artifact.get_context("session_name") or "program",
                             artifact_dir)
        self._artifact = artifact.copy_with_new_data(program)
