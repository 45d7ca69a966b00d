"""``export(model, example_inputs, export_recipe=...)`` -> ``ExportSession`` (ExecuTorch 1.5's
``executorch.export.export``): a pipeline of stages, each a step users know from the manual flow
(quantize, ``torch.export``, ``to_edge_transform_and_lower``, ``to_executorch``)."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule

from ..exir import to_edge, to_edge_transform_and_lower
from ..exir._warnings import experimental
from ..exir.torch_export import export_program
from ..extension.export_util.utils import save_pte_program
from ..util.torch_files import load_exported_program
from .recipe import EXPERIMENTAL, ExportRecipe, QuantizationRecipe
from .types import StageType

logger = logging.getLogger(__name__)
S = StageType

# Which stage may follow which (None: the stage may start a pipeline).
_PREDECESSORS: dict[StageType, set[StageType | None]] = {
    S.SOURCE_TRANSFORM: {None},
    S.QUANTIZE: {None, S.SOURCE_TRANSFORM},
    S.TORCH_EXPORT: {None, S.SOURCE_TRANSFORM, S.QUANTIZE},
    S.TO_EDGE_TRANSFORM_AND_LOWER: {None, S.TORCH_EXPORT},
    S.TO_EDGE: {None, S.TORCH_EXPORT},
    S.EDGE_PROGRAM_MANAGER_TRANSFORM: {S.TO_EDGE, S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_BACKEND},
    S.TO_BACKEND: {S.TO_EDGE, S.EDGE_PROGRAM_MANAGER_TRANSFORM},
    S.TO_EXECUTORCH: {S.TO_EDGE, S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_BACKEND,
                      S.EDGE_PROGRAM_MANAGER_TRANSFORM},
}


@dataclass
class PipelineArtifact:
    """What a stage produced (``data``) and what it knows about the run (``context``)."""

    data: Any
    context: dict[str, Any] = field(default_factory=dict)

    def get_context(self, key: str, default: Any = None) -> Any:
        return self.context.get(key, default)

    def add_context(self, key: str, value: Any) -> None:
        self.context[key] = value


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
    """One export: its stages, their artifacts, and the finished program."""

    def __init__(self, model: Any, example_inputs: Any = None,
                 export_recipe: ExportRecipe | None = None, name: str | None = None,
                 dynamic_shapes: Any = None, constant_methods: dict[str, Any] | None = None,
                 artifact_dir: str | None = None, generate_etrecord: bool | None = False) -> None:
        self._generate_etrecord = bool(generate_etrecord)
        if isinstance(model, str):
            model = load_exported_program(model)  # weights-only: a file never runs code
        self._model_type = _model_type(model)
        self._model = model if isinstance(model, dict) else {"forward": model}
        if example_inputs is None and self._model_type != "ExportedProgram":
            raise ValueError(f"example_inputs are required when model is {self._model_type}. "
                             "Only ExportedProgram inputs can omit example_inputs.")
        inputs = example_inputs or {}
        self._example_inputs = inputs if isinstance(inputs, dict) else {"forward": inputs}
        self._dynamic_shapes = (dynamic_shapes if isinstance(dynamic_shapes, dict) else
                                {"forward": dynamic_shapes} if dynamic_shapes is not None else {})
        self._recipe = export_recipe if export_recipe is not None else _portable_recipe()
        self._constant_methods = constant_methods
        self._name = name
        self._artifact_dir = artifact_dir
        self._stages = list(self._recipe.pipeline_stages or self._default_pipeline())
        self._artifacts: dict[StageType, PipelineArtifact] = {}

    # ---- the pipeline -------------------------------------------------------------------

    def _default_pipeline(self) -> list[StageType]:
        stages = []
        if self._model_type == "nn.Module":
            stages += [S.SOURCE_TRANSFORM, S.QUANTIZE]
        if self._model_type != "ExportedProgram":
            stages.append(S.TORCH_EXPORT)
        stages.append(S.TO_EDGE_TRANSFORM_AND_LOWER)
        lowering = self._recipe.lowering_recipe
        if lowering and lowering.edge_manager_transform_passes:
            stages.append(S.EDGE_PROGRAM_MANAGER_TRANSFORM)
        return [*stages, S.TO_EXECUTORCH]

    def _validate(self) -> None:
        if not self._stages:
            raise ValueError("Pipeline stages cannot be empty")
        refused = {"GraphModule": {S.SOURCE_TRANSFORM, S.QUANTIZE},
                   "ExportedProgram": {S.SOURCE_TRANSFORM, S.QUANTIZE, S.TORCH_EXPORT}}
        bad = set(self._stages) & refused.get(self._model_type, set())
        if bad:
            raise ValueError(f"Cannot run {', '.join(sorted(s.name for s in bad))} stage(s) with "
                             f"{self._model_type} input; remove them from pipeline_stages")
        previous: StageType | None = None
        for stage in self._stages:
            if previous not in _PREDECESSORS[stage]:
                raise ValueError(f"Invalid transition from {previous} to {stage}. Valid "
                                 f"predecessors for {stage}: {_PREDECESSORS[stage]}")
            previous = stage

    def export(self) -> None:
        """Run the stages in order (again from the model, if called twice)."""
        self._validate()
        self._artifacts.clear()
        data: Any = self._model
        runners: dict[StageType, Callable[[Any], Any]] = {
            S.SOURCE_TRANSFORM: self._source_transform, S.QUANTIZE: self._quantize,
            S.TORCH_EXPORT: self._torch_export,
            S.TO_EDGE_TRANSFORM_AND_LOWER: self._to_edge_transform_and_lower,
            S.TO_EDGE: self._to_edge, S.TO_BACKEND: self._to_backend,
            S.EDGE_PROGRAM_MANAGER_TRANSFORM: self._edge_manager_transform,
            S.TO_EXECUTORCH: self._to_executorch,
        }
        for stage in self._stages:
            start = time.perf_counter()
            logger.info("Executing stage: %s", stage)
            data = runners[stage](data)
            self._artifacts[stage] = PipelineArtifact(
                data, {"duration_ms": int((time.perf_counter() - start) * 1000),
                       "session_name": self._name})

    def _inputs(self, method: str) -> list[tuple]:
        samples = self._example_inputs.get(method)
        if not samples:
            raise ValueError(f"Example inputs for method {method} not found or empty.")
        return list(samples)

    def _source_transform(self, models: dict[str, Any]) -> dict[str, Any]:
        quant = self._recipe.quantization_recipe
        if not quant or not quant.ao_quantization_configs:
            return models
        from torchao.quantization import quantize_

        out = {}
        for method, model in models.items():
            model = model if self._recipe.source_transform_in_place else copy.deepcopy(model)
            for cfg in quant.ao_quantization_configs:
                quantize_(model, cfg.ao_base_config, cfg.filter_fn)
            out[method] = model
        return out

    def _quantize(self, models: dict[str, Any]) -> dict[str, Any]:
        quant = self._recipe.quantization_recipe
        if not quant or not quant.quantizers:
            return models
        return {method: _pt2e(model, self._inputs(method), quant,
                              self._dynamic_shapes.get(method), self._recipe.strict)
                for method, model in models.items()}

    def _torch_export(self, models: dict[str, Any]) -> dict[str, ExportedProgram]:
        eps = {}
        for method, model in models.items():
            ep = export_program(model, tuple(self._inputs(method)[0]),
                                     dynamic_shapes=self._dynamic_shapes.get(method),
                                     strict=self._recipe.strict)
            for transform in self._recipe.aten_transform_passes or []:
                ep = transform(method, ep)
            eps[method] = ep
        return eps

    def _edge_passes(self, eps: dict[str, ExportedProgram]) -> dict[str, list] | None:
        lowering = self._recipe.lowering_recipe
        if not lowering or not lowering.edge_transform_passes:
            return None
        return {m: [p for fn in lowering.edge_transform_passes for p in fn(m, ep)]
                for m, ep in eps.items()}

    def _compile_config(self) -> Any:
        lowering = self._recipe.lowering_recipe
        return lowering.edge_compile_config if lowering else None

    def _to_edge_transform_and_lower(self, eps: dict[str, ExportedProgram]) -> Any:
        lowering = self._recipe.lowering_recipe
        return to_edge_transform_and_lower(
            eps, transform_passes=self._edge_passes(eps),
            partitioner=lowering.partitioners if lowering else None,
            constant_methods=self._constant_methods, compile_config=self._compile_config(),
            generate_etrecord=self._generate_etrecord)

    def _to_edge(self, eps: dict[str, ExportedProgram]) -> Any:
        edge = to_edge(eps, constant_methods=self._constant_methods,
                       compile_config=self._compile_config(),
                       generate_etrecord=self._generate_etrecord)
        passes = self._edge_passes(eps)
        return edge.transform(passes) if passes else edge

    def _to_backend(self, edge: Any) -> Any:
        lowering = self._recipe.lowering_recipe
        partitioners = lowering.partitioners if lowering else None
        if isinstance(partitioners, dict):
            for i in range(max(map(len, partitioners.values()), default=0)):
                edge = edge.to_backend({m: ps[i] for m, ps in partitioners.items() if i < len(ps)})
            return edge
        for partitioner in partitioners or []:
            edge = edge.to_backend(partitioner)
        return edge

    def _edge_manager_transform(self, edge: Any) -> Any:
        lowering = self._recipe.lowering_recipe
        for fn in (lowering.edge_manager_transform_passes if lowering else None) or []:
            edge = edge.transform(fn(edge))
        return edge

    def _to_executorch(self, edge: Any) -> Any:
        program = edge.to_executorch(self._recipe.executorch_backend_config)
        if self._artifact_dir:
            save_pte_program(program, self._name or "program", self._artifact_dir)
        return program

    # ---- results ------------------------------------------------------------------------

    def get_stage_artifacts(self) -> dict[StageType, PipelineArtifact]:
        return self._artifacts

    def _artifact(self, *stages: StageType, what: str) -> Any:
        for stage in stages:
            if stage in self._artifacts:
                return self._artifacts[stage].data
        raise RuntimeError(f"{what} is not available: run the {stages[0].name} stage first "
                           f"(this session ran {[s.name for s in self._stages]}).")

    def get_exported_program(self, method_name: str = "forward") -> ExportedProgram:
        eps = self._artifact(S.TORCH_EXPORT, what="Exported program")
        if method_name not in eps:
            raise KeyError(f"Method name '{method_name}' not found in exported programs. "
                           f"Available methods: {list(eps)}")
        return eps[method_name]

    def get_edge_program_manager(self) -> Any:
        return self._artifact(S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_BACKEND,
                              S.EDGE_PROGRAM_MANAGER_TRANSFORM, S.TO_EDGE,
                              what="Edge program manager")

    def get_executorch_program_manager(self) -> Any:
        return self._artifact(S.TO_EXECUTORCH, what="Executorch program manager")

    def get_executorch_program(self) -> Any:
        return self.get_executorch_program_manager().executorch_program

    def get_pte_buffer(self) -> bytes:
        return self.get_executorch_program_manager().buffer

    def save_to_pte(self, output_name: str) -> None:
        if not output_name:
            raise ValueError("save_to_pte needs a file name")
        save_pte_program(self.get_executorch_program_manager(), output_name)

    def get_example_input(self, method_name: str = "forward") -> tuple:
        if method_name not in self._example_inputs:
            raise KeyError(f"Method name '{method_name}' not found in example inputs")
        return tuple(self._inputs(method_name)[0])

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
        from ..devtools.backend_debug import get_delegation_info

        edge = self.get_edge_program_manager()
        for method in sorted(edge.methods):
            info = get_delegation_info(edge.exported_program(method).graph_module)
            print(f"Delegation info for method '{method}':\n{info.get_summary()}")

    def get_etrecord(self) -> Any:
        """The ETRecord of this export (``generate_etrecord=True``), as ExecuTorch's session."""
        if not self._generate_etrecord:
            raise RuntimeError("ETRecord was not generated; pass generate_etrecord=True to "
                               "edgetorch.export.export")
        return self.get_executorch_program_manager().get_etrecord()


def _model_type(model: Any) -> str:
    if isinstance(model, dict):
        if not model:
            raise ValueError("model is an empty dict; give {method_name: model}")
        return _model_type(next(iter(model.values())))
    if isinstance(model, ExportedProgram):
        return "ExportedProgram"
    if isinstance(model, GraphModule):
        return "GraphModule"
    if isinstance(model, torch.nn.Module):
        return "nn.Module"
    raise TypeError(f"Unsupported model type: {type(model)}")


def _portable_recipe() -> ExportRecipe:
    import warnings

    with warnings.catch_warnings():  # the caller chose no recipe; don't warn on our default
        warnings.simplefilter("ignore")
        return ExportRecipe(name="portable")


def _pt2e(model: Any, samples: list[tuple], quant: QuantizationRecipe, dynamic_shapes: Any,
          strict: bool) -> Any:
    """prepare_pt2e (or prepare_qat_pt2e + train_fn) -> calibrate -> convert_pt2e."""
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )
    from torchao.quantization.pt2e.quantizer import ComposableQuantizer

    quantizers = quant.quantizers or []
    quantizer = quantizers[0] if len(quantizers) == 1 else ComposableQuantizer(quantizers)
    gm = export_program(model, tuple(samples[0]), dynamic_shapes=dynamic_shapes,
                             strict=strict).module()
    for p in quant.pre_prepare_passes or []:
        gm = p(gm)
    if quant.is_qat:
        if quant.train_fn is None:
            raise ValueError("QuantizationRecipe(is_qat=True) needs a train_fn")
        gm = prepare_qat_pt2e(gm, quantizer)
    else:
        gm = prepare_pt2e(gm, quantizer)
    for p in quant.post_prepare_passes or []:
        gm = p(gm)
    if quant.is_qat:
        quant.train_fn(gm)
    else:
        for sample in (quant.calibration_inputs_fn() if quant.calibration_inputs_fn else samples):
            gm(*sample)
    for p in quant.pre_convert_passes or []:
        gm = p(gm)
    gm = convert_pt2e(gm)
    for p in quant.post_convert_passes or []:
        gm = p(gm)
    return gm
