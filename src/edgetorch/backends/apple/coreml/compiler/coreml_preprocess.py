"""The ahead-of-time half of the Core ML backend: ``CoreMLBackend.preprocess``.

As in ExecuTorch 1.5.1, the delegated Edge program goes through coremltools'
``ct.convert(..., convert_to="mlprogram")`` (its PyTorch frontend reads ``ExportedProgram``s,
debug handles included) with the compile specs' compute units, precision (fp16 by
default), minimum deployment target, pass pipeline and enumerated shapes, then an optional
post-conversion linear weight quantization (``cto.coreml.linear_quantize_weights``). The blob
is the flattened directory ``lowered_module/``: ``model.mlpackage`` (or ``model.mlmodelc``,
which needs macOS), ``metadata.json`` (input/output names and an ``executorch_<uuid4>``
identifier) and ``debug_info.json``. Compile specs are encoded byte for byte as ExecuTorch
encodes them (they are stored in the ``.pte``).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import coremltools as ct
import coremltools.optimize as cto
from torch._export.verifier import Verifier
from torch.export import ExportedProgram

from .....exir.backend import BackendDetails, CompileSpec, PreprocessResult
from .. import inmemoryfs
from . import torch_ops  # noqa: F401  (registers the Edge ops coremltools lacks)
from .enumerated_shape_utils import _get_ct_inputs, _SymbolicShapeToEnumeratedShapeMap

logger = logging.getLogger(__name__)


class COMPILE_SPEC_KEYS(Enum):
    COMPUTE_UNITS = "compute_units"
    MODEL_TYPE = "model_type"
    MIN_DEPLOYMENT_TARGET = "min_deployment_target"
    MODEL_COMPUTE_PRECISION = "model_compute_precision"
    OP_LINEAR_QUANTIZER_CONFIG = "op_linear_quantizer_config"
    ENUMERATED_SHAPES = "enumerated_shapes"
    PASS_PIPELINE = "pass_pipeline"
    MULTIMETHOD_WEIGHT_SHARING_STRATEGY = "multimethod_weight_sharing_strategy"


class MULTIMETHOD_WEIGHT_SHARING_STRATEGY(Enum):
    DISABLED = "disabled"
    POSITIONAL = "positional"


class MODEL_PATHS(Enum):
    MODEL = "model.mlpackage"
    COMPILED_MODEL = "model.mlmodelc"
    METADATA = "metadata.json"
    DEBUG_INFO = "debug_info.json"


@dataclass
class ModelMetadata:
    inputNames: list[str]
    outputNames: list[str]
    identifier: str


@dataclass
class ModelDebugInfo:
    versionInfo: dict[str, str]
    debugSymbolToOperationPath: dict[str, list[dict[str, str]]]
    debugSymbolToHandles: dict[str, list[int]]


def _spec(key: COMPILE_SPEC_KEYS, value: str) -> CompileSpec:
    return CompileSpec(key.value, value.encode("utf-8"))


def _find(compile_specs: list[CompileSpec], key: COMPILE_SPEC_KEYS) -> str | None:
    for spec in compile_specs:
        if spec.key == key.value:
            return bytes(spec.value).decode("utf-8")
    return None


class CoreMLBackend(BackendDetails):
    class MODEL_TYPE(Enum):
        MODEL = "model"  # the .mlpackage, compiled on device
        COMPILED_MODEL = "compiled_model"  # the .mlmodelc (needs the macOS compiler)

    # ---- compile specs ------------------------------------------------------------------

    @staticmethod
    def generate_model_type_compile_spec(model_type: MODEL_TYPE) -> CompileSpec:
        return _spec(COMPILE_SPEC_KEYS.MODEL_TYPE, model_type.value)

    @staticmethod
    def model_type_from_compile_specs(compile_specs: list[CompileSpec]) -> MODEL_TYPE:
        value = _find(compile_specs, COMPILE_SPEC_KEYS.MODEL_TYPE)
        return CoreMLBackend.MODEL_TYPE(value) if value is not None \
            else CoreMLBackend.MODEL_TYPE.MODEL

    @staticmethod
    def generate_compute_precision_compile_spec(precision: ct.precision) -> CompileSpec:
        return _spec(COMPILE_SPEC_KEYS.MODEL_COMPUTE_PRECISION, precision.value)

    @staticmethod
    def model_compute_precision_from_compile_specs(
            compile_specs: list[CompileSpec]) -> ct.precision:
        value = _find(compile_specs, COMPILE_SPEC_KEYS.MODEL_COMPUTE_PRECISION)
        return ct.precision(value) if value is not None else ct.precision.FLOAT16

    @staticmethod
    def generate_minimum_deployment_target_compile_spec(
            target: ct.target | None) -> CompileSpec:
        return _spec(COMPILE_SPEC_KEYS.MIN_DEPLOYMENT_TARGET,
                     "" if target is None else str(target.value))

    @staticmethod
    def min_deployment_target_from_compile_specs(
            compile_specs: list[CompileSpec]) -> ct.target | None:
        value = _find(compile_specs, COMPILE_SPEC_KEYS.MIN_DEPLOYMENT_TARGET)
        return ct.target(int(value)) if value else None

    @staticmethod
    def compute_unit_from_compile_specs(compile_specs: list[CompileSpec]) -> ct.ComputeUnit:
        value = _find(compile_specs, COMPILE_SPEC_KEYS.COMPUTE_UNITS)
        return ct.ComputeUnit[value.upper()] if value is not None else ct.ComputeUnit.ALL

    @staticmethod
    def generate_compute_unit_compile_spec(compute_unit: ct.ComputeUnit) -> CompileSpec:
        return _spec(COMPILE_SPEC_KEYS.COMPUTE_UNITS, compute_unit.name.lower())

    @staticmethod
    def generate_op_linear_quantizer_config_compile_spec(config: dict) -> CompileSpec:
        """``cto.coreml.OpLinearQuantizerConfig`` as a dict, applied after conversion."""
        return _spec(COMPILE_SPEC_KEYS.OP_LINEAR_QUANTIZER_CONFIG, json.dumps(config))

    @staticmethod
    def op_linear_quantizer_config_from_compile_specs(compile_specs: list[CompileSpec]):
        value = _find(compile_specs, COMPILE_SPEC_KEYS.OP_LINEAR_QUANTIZER_CONFIG)
        if value is None:
            return None
        return cto.coreml.OpLinearQuantizerConfig._from_dict(json.loads(value))

    @staticmethod
    def generate_pass_pipeline_compile_spec(pass_names: list[str]) -> CompileSpec:
        return _spec(COMPILE_SPEC_KEYS.PASS_PIPELINE, json.dumps(pass_names))

    @staticmethod
    def pass_pipeline_from_compile_specs(compile_specs: list[CompileSpec]) -> ct.PassPipeline:
        value = _find(compile_specs, COMPILE_SPEC_KEYS.PASS_PIPELINE)
        if value is None:
            return ct.PassPipeline.DEFAULT
        return ct.PassPipeline(json.loads(value), pipeline_name="executorch_user_pipeline")

    @staticmethod
    def generate_multimethod_weight_sharing_strategy_compile_spec(
            strategy: MULTIMETHOD_WEIGHT_SHARING_STRATEGY) -> CompileSpec:
        return _spec(COMPILE_SPEC_KEYS.MULTIMETHOD_WEIGHT_SHARING_STRATEGY, strategy.value)

    @staticmethod
    def multimethod_weight_sharing_strategy_from_compile_specs(
            compile_specs: list[CompileSpec]) -> MULTIMETHOD_WEIGHT_SHARING_STRATEGY:
        value = _find(compile_specs, COMPILE_SPEC_KEYS.MULTIMETHOD_WEIGHT_SHARING_STRATEGY)
        return MULTIMETHOD_WEIGHT_SHARING_STRATEGY(value) if value is not None \
            else MULTIMETHOD_WEIGHT_SHARING_STRATEGY.POSITIONAL

    @staticmethod
    def generate_enumerated_shapes_compile_spec(
            ep: ExportedProgram, enumerated_shapes: dict[str, list[list[int]]]) -> CompileSpec:
        """The shapes each dynamic input may take (``{"x": [[1, 1, 24], [8, 9, 24]]}``),
        tied by position across inputs (several enumerated inputs need iOS 18)."""
        emap = _SymbolicShapeToEnumeratedShapeMap.from_exported_program(ep, enumerated_shapes)
        return _spec(COMPILE_SPEC_KEYS.ENUMERATED_SHAPES, emap.to_json())

    @staticmethod
    def enumerated_shapes_from_compile_specs(compile_specs: list[CompileSpec]):
        value = _find(compile_specs, COMPILE_SPEC_KEYS.ENUMERATED_SHAPES)
        return None if value is None else _SymbolicShapeToEnumeratedShapeMap.from_json(value)

    @staticmethod
    def generate_compile_specs(
            compute_unit: ct.ComputeUnit = ct.ComputeUnit.ALL,
            minimum_deployment_target: ct.target | None = None,
            compute_precision: ct.precision = ct.precision.FLOAT16,
            model_type: MODEL_TYPE = MODEL_TYPE.MODEL,
            op_linear_quantizer_config: dict | None = None,
            pass_names: list[str] | None = None) -> list[CompileSpec]:
        """The compile specs, in ExecuTorch's order."""
        specs = [CoreMLBackend.generate_compute_unit_compile_spec(compute_unit),
                 CoreMLBackend.generate_minimum_deployment_target_compile_spec(
                     minimum_deployment_target),
                 CoreMLBackend.generate_compute_precision_compile_spec(compute_precision),
                 CoreMLBackend.generate_model_type_compile_spec(model_type)]
        if op_linear_quantizer_config is not None:
            specs.append(CoreMLBackend.generate_op_linear_quantizer_config_compile_spec(
                op_linear_quantizer_config))
        if pass_names is not None:
            specs.append(CoreMLBackend.generate_pass_pipeline_compile_spec(pass_names))
        return specs

    # ---- metadata ---------------------------------------------------------------------

    @staticmethod
    def model_metadata_from_spec(model_spec: Any, identifier: str) -> ModelMetadata:
        inputs = [i.name for i in model_spec.description.input]
        outputs = [o.name for o in model_spec.description.output]
        if not outputs:
            raise ValueError("Cannot lower a model with no outputs in CoreML.")
        if not inputs:
            assert model_spec.specificationVersion >= 9, (
                "Deploying a model with no inputs in CoreML requires you set "
                "minimum_deployment_target to iOS18 or later in the CoreMLPartitioner.")
        return ModelMetadata(inputNames=inputs, outputNames=outputs, identifier=identifier)

    @staticmethod
    def get_debug_symbol(operation_path: list[dict[str, str]]) -> str | None:
        """``<output>:<operator>`` of an operation path's last step."""
        if not operation_path:
            return None
        op, out = operation_path[-1].get("Operator"), operation_path[-1].get("Output")
        return None if op is None or out is None else f"{out}:{op}"

    @staticmethod
    def get_model_debug_info(model_package_dir: Path) -> ModelDebugInfo | None:
        """coremltools' ``executorch_debug_handle_mapping.json`` regrouped by debug symbol."""
        path = model_package_dir / "executorch_debug_handle_mapping.json"
        if not path.is_file():
            return None
        try:
            info = json.loads(path.read_text())
        except ValueError:
            return None
        if info is None or info.get("mapping") is None:
            return None
        paths: dict[str, list[dict[str, str]]] = {}
        handles: dict[str, list[int]] = {}
        for handle, operation_paths in info["mapping"].items():
            try:
                value = int(handle)
            except ValueError:
                continue
            for op_path in operation_paths:
                symbol = CoreMLBackend.get_debug_symbol(op_path)
                if symbol is None:
                    continue
                handles.setdefault(symbol, []).append(value)
                paths[symbol] = op_path
        return ModelDebugInfo(versionInfo=info.get("version", {}),
                              debugSymbolToOperationPath=paths, debugSymbolToHandles=handles)

    @staticmethod
    def save_model_metadata(metadata: ModelMetadata, model_dir_path: Path) -> None:
        (Path(model_dir_path) / MODEL_PATHS.METADATA.value).write_text(
            json.dumps(asdict(metadata)))

    @staticmethod
    def save_model_debug_info(info: ModelDebugInfo, model_dir_path: Path) -> None:
        (Path(model_dir_path) / MODEL_PATHS.DEBUG_INFO.value).write_text(json.dumps(asdict(info)))

    # ---- conversion -------------------------------------------------------------------

    @staticmethod
    def _convert_to_mlmodel(edge_program: ExportedProgram, compile_specs: list[CompileSpec],
                            skip_model_load: bool = True) -> ct.models.MLModel:
        target = CoreMLBackend.min_deployment_target_from_compile_specs(compile_specs)
        emap = CoreMLBackend.enumerated_shapes_from_compile_specs(compile_specs)
        inputs = None
        if emap is not None:
            inputs = _get_ct_inputs(edge_program, emap)
            enumerated = sum(isinstance(i.shape, ct.EnumeratedShapes) for i in inputs)
            if (target is None or target < ct.target.iOS18) and enumerated > 1:
                raise ValueError(f"Your program has {enumerated} enumerated inputs, but "
                                 f"minimum_deployment_target is {target}. Multiple enumerated "
                                 "inputs requires iOS18 or later.")
        mlmodel = ct.convert(
            model=edge_program, source="pytorch", convert_to="mlprogram",
            pass_pipeline=CoreMLBackend.pass_pipeline_from_compile_specs(compile_specs),
            skip_model_load=skip_model_load,
            compute_precision=CoreMLBackend.model_compute_precision_from_compile_specs(
                compile_specs),
            minimum_deployment_target=target,
            compute_units=CoreMLBackend.compute_unit_from_compile_specs(compile_specs),
            inputs=inputs)
        config = CoreMLBackend.op_linear_quantizer_config_from_compile_specs(compile_specs)
        if config is not None:
            logger.warning("Core ML Backend op_linear_quantizer_config API is experimental")
            # Embedding tables stay unquantized, except a table that is also another op's
            # weight (tied embeddings): coremltools refuses a constant configured two ways.
            tied = _gathers_sharing_a_weight(mlmodel)
            mlmodel = cto.coreml.linear_quantize_weights(mlmodel, config=cto.coreml.OptimizationConfig(
                global_config=config, op_type_configs={"gather": None},
                op_name_configs={name: config for name in tied}))
        return mlmodel

    @staticmethod
    def preprocess_model(mlmodel: ct.models.MLModel, model_type: MODEL_TYPE) -> PreprocessResult:
        identifier = "executorch_" + str(uuid.uuid4())
        dir_path = Path(tempfile.gettempdir()) / identifier
        model_dir = dir_path / "lowered_module"
        spec = mlmodel.get_spec()
        metadata = CoreMLBackend.model_metadata_from_spec(spec, identifier)
        model_path = model_dir / MODEL_PATHS.MODEL.value
        try:
            mlmodel.save(str(model_path))
            debug_info = CoreMLBackend.get_model_debug_info(model_path)
            if model_type == CoreMLBackend.MODEL_TYPE.COMPILED_MODEL:
                shutil.rmtree(str(model_path))
                shutil.move(mlmodel.get_compiled_model_path(),
                            str(model_dir / MODEL_PATHS.COMPILED_MODEL.value))
            CoreMLBackend.save_model_metadata(metadata, model_dir)
            if debug_info is not None:
                CoreMLBackend.save_model_debug_info(debug_info, model_dir)
            blob = inmemoryfs.flatten(_read_directory(model_dir))
        finally:
            shutil.rmtree(str(dir_path), ignore_errors=True)
        handles = None if debug_info is None else {
            k: tuple(v) for k, v in debug_info.debugSymbolToHandles.items()}
        return PreprocessResult(processed_bytes=blob, debug_handle_map=handles)

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        _rename_as_executorch(edge_program)
        # coremltools picks its ExecuTorch frontend (``source_dialect`` TorchExport::EDGE)
        # from the program's dialect, as it does for ExecuTorch's Edge programs.
        edge_program._verifiers = [_EdgeDialect()]
        model_type = CoreMLBackend.model_type_from_compile_specs(compile_specs)
        # A compiled model needs the model loaded (macOS only); an mlpackage does not.
        mlmodel = CoreMLBackend._convert_to_mlmodel(
            edge_program, compile_specs,
            skip_model_load=model_type != CoreMLBackend.MODEL_TYPE.COMPILED_MODEL)
        return CoreMLBackend.preprocess_model(mlmodel, model_type=model_type)


class _EdgeDialect(Verifier):
    """Says "EDGE" (and checks nothing beyond torch's structural checks): the program is
    Edge dialect, as the partitioner and the verifier of ``to_edge`` made sure."""

    dialect = "EDGE"

    def allowed_op_types(self):
        return (Callable,)


def _rename_as_executorch(ep: ExportedProgram) -> None:
    """Operator nodes take the names ExecuTorch's Edge graph gives them (recorded by the
    partitioner), which Core ML uses for its values and the delegate's output names."""
    from ..partition.coreml_partitioner import NAME_KEY

    nodes = [n for n in ep.graph.nodes if n.op not in ("placeholder", "output")
             and NAME_KEY in n.meta and n.meta[NAME_KEY] != n.name]
    if not nodes:
        return
    old = {n: n.name for n in nodes}
    for i, n in enumerate(nodes):  # two steps: a new name may be another node's old one
        n._rename(f"_edgetorch_renaming_{i}")
    for n in nodes:
        n._rename(n.meta[NAME_KEY])
    renamed = {old[n]: n.name for n in nodes}
    for spec in ep.graph_signature.output_specs:
        if hasattr(spec.arg, "name") and spec.arg.name in renamed:
            spec.arg.name = renamed[spec.arg.name]
    ep.graph_module.recompile()


def _read_directory(path: Path) -> inmemoryfs.Directory:
    d = inmemoryfs.Directory(path.name)
    for item in sorted(path.iterdir()):
        d.items[item.name] = _read_directory(item) if item.is_dir() else item.read_bytes()
    return d


def _gathers_sharing_a_weight(mlmodel: ct.models.MLModel) -> list[str]:
    """Gather ops whose constant table another kind of op reads too."""
    program = getattr(mlmodel, "_mil_program", None)
    if program is None:
        return []
    consumers: dict[str, list] = {}
    for function in program.functions.values():
        for op in function.operations:
            for value in op.inputs.values():
                for var in value if isinstance(value, (list, tuple)) else [value]:
                    source = getattr(var, "op", None)
                    if source is not None and source.op_type == "const":
                        consumers.setdefault(var.name, []).append(op)
    shared = []
    for ops in consumers.values():
        gathers = [op for op in ops if op.op_type == "gather"]
        if gathers and len(gathers) < len(ops):
            shared += [op.name for op in gathers]
    return shared
