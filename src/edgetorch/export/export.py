"""``export(model, example_inputs, export_recipe=...)`` -> ``ExportSession`` (ExecuTorch 1.5's
``executorch.export.export``): a pipeline of stages, each a step users know from the manual flow
(quantize, ``torch.export``, ``to_edge_transform_and_lower``, ``to_executorch``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule

from ..errors import ExportArgumentError
from ..exir._warnings import experimental
from ..extension.export_util.utils import save_pte_program
from ..util.torch_files import load_exported_program
from .recipe import EXPERIMENTAL, ExportRecipe
from .stages import (
    EdgeProgramManagerTransformStage,
    EdgeTransformAndLowerStage,
    ExecutorchStage,
    PipelineArtifact,
    QuantizeStage,
    SourceTransformStage,
    Stage,
    ToBackendStage,
    ToEdgeStage,
    TorchExportStage,
)
from .types import StageType

logger = logging.getLogger(__name__)
S = StageType

# Stages a model of each kind has already been through.
_DONE_BY_INPUT = {"GraphModule": {S.SOURCE_TRANSFORM, S.QUANTIZE},
                  "ExportedProgram": {S.SOURCE_TRANSFORM, S.QUANTIZE, S.TORCH_EXPORT}}
# Stages whose artifact is an Edge program manager (the session's is the last that ran).
_EDGE_STAGES = (S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_BACKEND, S.EDGE_PROGRAM_MANAGER_TRANSFORM,
                S.TO_EDGE)


@experimental(EXPERIMENTAL)
def export(model: Any, example_inputs: Any = None, export_recipe: ExportRecipe | None = None,
           name: str | None = None, dynamic_shapes: Any = None,
           constant_methods: dict[str, Any] | None = None, artifact_dir: str | None = None,
           generate_etrecord: bool = False) -> ExportSession:
    """Run ``export_recipe``'s pipeline on ``model`` (an ``nn.Module``, a ``GraphModule``, an
    ``ExportedProgram``, a path to a saved one, or ``{method: ...}`` of those) and return the
    session. ``example_inputs`` is a list of input tuples (the first is exported, all calibrate)
    or ``{method: [...]}``."""
    session = ExportSession(model, example_inputs, export_recipe, name, dynamic_shapes,
                            constant_methods, artifact_dir, generate_etrecord)
    session.export()
    return session


@experimental(EXPERIMENTAL)
class ExportSession:
    """One export: a registry of stages (built from the recipe, replaceable with
    ``register_stage``), the pipeline of stage types it runs, and each stage's artifact."""

    def __init__(self, model: Any, example_inputs: Any = None,
                 export_recipe: ExportRecipe | None = None, name: str | None = None,
                 dynamic_shapes: Any = None, constant_methods: dict[str, Any] | None = None,
                 artifact_dir: str | None = None, generate_etrecord: bool | None = False) -> None:
        if isinstance(model, str):
            model = load_exported_program(model)  # weights-only: a file never runs code
        self._input_model_type = self._detect_model_type(model)
        self._model = model if isinstance(model, dict) else {"forward": model}
        if example_inputs is None and self._input_model_type != "ExportedProgram":
            raise ValueError(f"example_inputs are required when model is "
                             f"{self._input_model_type}. Only ExportedProgram inputs can omit "
                             "example_inputs.")
        inputs = example_inputs or {}
        self._example_inputs = inputs if isinstance(inputs, dict) else {"forward": inputs}
        self._dynamic_shapes = (dynamic_shapes if isinstance(dynamic_shapes, dict) else
                                {"forward": dynamic_shapes} if dynamic_shapes is not None else {})
        self._export_recipe = export_recipe if export_recipe is not None else _portable_recipe()
        self._quant_recipe = self._export_recipe.quantization_recipe
        self._lowering_recipe = self._export_recipe.lowering_recipe
        self._pipeline_stages = list(self._export_recipe.pipeline_stages or
                                     self._get_default_pipeline())
        self._stage_registry = self._build_stages(self._pipeline_stages)
        self._run_context: dict[str, Any] = {
            "example_inputs": self._example_inputs, "dynamic_shapes": self._dynamic_shapes,
            "constant_methods": constant_methods, "export_recipe": self._export_recipe,
            "session_name": name, "artifact_dir": artifact_dir,
            "generate_etrecord": bool(generate_etrecord)}
        self._stage_to_artifacts: dict[StageType, PipelineArtifact] = {}

    @staticmethod
    def _detect_model_type(model: Any) -> str:
        """"nn.Module", "GraphModule" or "ExportedProgram" (a dict's first value's)."""
        if isinstance(model, dict):
            if not model:
                raise ValueError("model is an empty dict; give {method_name: model}")
            return ExportSession._detect_model_type(next(iter(model.values())))
        if isinstance(model, ExportedProgram):
            return "ExportedProgram"
        if isinstance(model, GraphModule):
            return "GraphModule"
        if isinstance(model, torch.nn.Module):
            return "nn.Module"
        raise TypeError(f"Unsupported model type: {type(model)}")

    # ---- the pipeline -------------------------------------------------------------------

    def _get_default_pipeline(self) -> list[StageType]:
        """Quantization only for an eager module, ``torch.export`` unless already exported,
        the manager passes' stage when the recipe has some, then to_executorch."""
        stages = [s for s in (S.SOURCE_TRANSFORM, S.QUANTIZE, S.TORCH_EXPORT)
                  if s not in _DONE_BY_INPUT.get(self._input_model_type, set())]
        stages.append(S.TO_EDGE_TRANSFORM_AND_LOWER)
        if self._lowering_recipe and self._lowering_recipe.edge_manager_transform_passes:
            stages.append(S.EDGE_PROGRAM_MANAGER_TRANSFORM)
        return [*stages, S.TO_EXECUTORCH]

    def _build_stages(self, stages: list[StageType]) -> dict[StageType, Stage]:
        """One stage per known type in ``stages``, configured from the recipe (an unknown
        type must be registered with ``register_stage`` before ``export``)."""
        recipe, lowering = self._export_recipe, self._lowering_recipe
        makers = {
            S.SOURCE_TRANSFORM: lambda: SourceTransformStage(
                self._quant_recipe, in_place=recipe.source_transform_in_place),
            S.QUANTIZE: lambda: QuantizeStage(self._quant_recipe, strict=recipe.strict),
            S.TORCH_EXPORT: lambda: TorchExportStage(
                list(recipe.aten_transform_passes) if recipe.aten_transform_passes is not None
                else None, strict=recipe.strict),
            S.TO_EDGE_TRANSFORM_AND_LOWER: lambda: EdgeTransformAndLowerStage.from_recipe(lowering),
            S.TO_EDGE: lambda: ToEdgeStage.from_recipe(lowering),
            S.EDGE_PROGRAM_MANAGER_TRANSFORM: lambda: self._manager_transform_stage(stages),
            S.TO_BACKEND: lambda: ToBackendStage.from_recipe(lowering),
            S.TO_EXECUTORCH: lambda: ExecutorchStage(recipe.executorch_backend_config),
        }
        registry: dict[StageType, Stage] = {}
        for stage_type in stages:
            if stage_type in makers:
                registry[stage_type] = makers[stage_type]()
            else:
                logger.info("%s is unknown, register it with session.register_stage()",
                            stage_type)
        return registry

    def _manager_transform_stage(self, stages: list[StageType]) -> Stage:
        """The recipe's Edge passes run once: in TO_EDGE_TRANSFORM_AND_LOWER when the
        pipeline has it, else here (after TO_EDGE), before the manager passes."""
        lowering = self._lowering_recipe
        if lowering is None:
            return EdgeProgramManagerTransformStage()
        edge_passes = (None if S.TO_EDGE_TRANSFORM_AND_LOWER in stages
                       else lowering.edge_transform_passes)
        return EdgeProgramManagerTransformStage(edge_passes,
                                                lowering.edge_manager_transform_passes)

    def register_stage(self, stage_type: StageType, stage: Stage) -> None:
        """Add a stage for a new type, or replace the one the recipe configured."""
        self._stage_registry[stage_type] = stage

    def get_registered_stage(self, stage_type: StageType) -> Stage | None:
        return self._stage_registry.get(stage_type)

    def get_all_registered_stages(self) -> dict[StageType, Stage]:
        return self._stage_registry

    def _validate_pipeline_sequence(self, stages: list[StageType]) -> None:
        """Refuse stages the input has been through, a first stage that cannot start a
        pipeline, and a stage after one it may not follow."""
        if not stages:
            raise ValueError("Pipeline stages cannot be empty")
        done = set(stages) & _DONE_BY_INPUT.get(self._input_model_type, set())
        if done:
            names = ", ".join(sorted(s.name for s in done))
            raise ValueError(f"Cannot run {names} stage(s) with {self._input_model_type} input: "
                             f"the {self._input_model_type} has been through them already. "
                             f"Remove {names} from pipeline_stages or give an earlier form of "
                             "the model.")
        previous = None
        for stage_type in stages:
            stage = self._stage_registry.get(stage_type)
            if stage is None:
                raise ValueError(f"Stage {stage_type} not found in registry, register it using "
                                 "session.register_stage()")
            valid = stage.valid_predecessor_stages
            if previous is None and not stage.can_start_pipeline:
                raise ValueError(f"Stage {_name(stage_type)} cannot start a pipeline; put one "
                                 f"of {[_name(s) for s in valid]} before it")
            if previous is not None and valid and previous not in valid:
                raise ValueError(f"Invalid transition from {_name(previous)} to "
                                 f"{_name(stage_type)}. Valid predecessors for "
                                 f"{_name(stage_type)}: {[_name(s) for s in valid]}")
            previous = stage_type

    def _run_pipeline(self) -> None:
        self._validate_pipeline_sequence(self._pipeline_stages)
        self._stage_to_artifacts.clear()  # after validation: a refused pipeline keeps the last run
        artifact = PipelineArtifact(self._model, dict(self._run_context))
        for stage_type in self._pipeline_stages:
            stage = self._stage_registry[stage_type]
            logger.info("Executing stage: %s", stage_type)
            start = time.perf_counter()
            stage.run(artifact)
            artifact = stage.get_artifacts()
            artifact.add_context("duration_ms", int((time.perf_counter() - start) * 1000))
            self._stage_to_artifacts[stage_type] = artifact

    def export(self) -> None:
        """Run the pipeline's stages in order (again from the model, if called twice)."""
        self._run_pipeline()

    # ---- results ------------------------------------------------------------------------

    def get_stage_artifacts(self) -> dict[StageType, PipelineArtifact]:
        return self._stage_to_artifacts

    def _data(self, stage_type: StageType) -> Any:
        artifact = self._stage_to_artifacts.get(stage_type)
        return None if artifact is None else artifact.data

    def get_exported_program(self, method_name: str = "forward") -> ExportedProgram:
        programs = self._data(S.TORCH_EXPORT)
        if programs is None:
            raise RuntimeError("Exported program is not available. Run Torch Export Stage first "
                               f"(this session's pipeline: {[s.name for s in self._pipeline_stages]}).")
        if method_name not in programs:
            raise KeyError(f"Method name '{method_name}' not found in exported programs. "
                           f"Available methods: {list(programs)}")
        return programs[method_name]

    def get_edge_program_manager(self) -> Any:
        """The Edge program manager of the last Edge stage that ran."""
        ran = [s for s in self._stage_to_artifacts if s in _EDGE_STAGES]
        if ran and self._data(ran[-1]) is not None:
            return self._data(ran[-1])
        raise RuntimeError("Edge program manager is not available. Run one of the edge stages "
                           "first: TO_EDGE_TRANSFORM_AND_LOWER, TO_EDGE, "
                           "EDGE_PROGRAM_MANAGER_TRANSFORM, or TO_BACKEND.")

    def get_executorch_program_manager(self) -> Any:
        program = self._data(S.TO_EXECUTORCH)
        if program is None:
            raise RuntimeError("Executorch program manager is not initialized. Run Executorch "
                               "Stage first (export(), with TO_EXECUTORCH in the pipeline).")
        return program

    def get_executorch_program(self) -> Any:
        return self.get_executorch_program_manager().executorch_program

    def get_pte_buffer(self) -> bytes:
        return self.get_executorch_program_manager().buffer

    def save_to_pte(self, output_name: str) -> None:
        """Write the program to ``output_name`` (``.pte`` added when missing)."""
        if not output_name:
            raise ExportArgumentError(f"save_to_pte needs a file name, got {output_name!r}")
        save_pte_program(self.get_executorch_program_manager(), output_name)

    def get_example_input(self, method_name: str = "forward") -> tuple:
        if method_name not in self._example_inputs:
            raise KeyError(f"Method name '{method_name}' not found in example inputs")
        samples = self._example_inputs[method_name]
        if not samples:
            raise ValueError(f"Example inputs list for method {method_name} is empty")
        return tuple(samples[0])

    def run_method(self, method_name: str = "forward",
                   example_inputs: tuple | None = None) -> Sequence[Any]:
        """Run the finished program in edgetorch's runtime (the example input by default)."""
        from ..runtime import Runtime, Verification

        program = Runtime.get().load_program(self.get_pte_buffer(),
                                             verification=Verification.Minimal)
        method = program.load_method(method_name)
        inputs = example_inputs if example_inputs is not None else self.get_example_input(method_name)
        return method.execute(list(inputs))

    def print_delegation_info(self) -> None:
        """Each method's delegation summary and per-operator table, from the lowering stage."""
        lowering = [s for s in self._stage_to_artifacts
                    if s in (S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_BACKEND)]
        if not lowering:
            raise RuntimeError("No delegation info available: run a lowering stage first "
                               "(TO_EDGE_TRANSFORM_AND_LOWER or TO_BACKEND)")
        infos = self._stage_to_artifacts[lowering[-1]].get_context("delegation_info_by_method")
        for method, info in sorted((infos or {}).items()):
            print(f"Delegation info for method '{method}':\n{info}")

    def get_etrecord(self) -> Any:
        """The ETRecord of this export (``generate_etrecord=True``), as ExecuTorch's session."""
        if not self._run_context["generate_etrecord"]:
            raise RuntimeError("ETRecord was not generated; pass generate_etrecord=True to "
                               "edgetorch.export.export")
        return self.get_executorch_program_manager().get_etrecord()


def _name(stage_type: Any) -> str:
    return stage_type.name if isinstance(stage_type, StageType) else str(stage_type)


def _portable_recipe() -> ExportRecipe:
    import warnings

    with warnings.catch_warnings():  # the caller chose no recipe; don't warn on our default
        warnings.simplefilter("ignore")
        return ExportRecipe(name="portable")
