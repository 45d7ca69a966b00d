"""``debug_quantization``: per-layer accuracy of a quantized model across every stage of the
flow, on the user's own data.

Stages, in order (each compared with the float model, layer by layer):

| stage | what runs | values |
|---|---|---|
| ``float`` | the float model (its ``torch.export``) | every layer's output |
| ``fake_quant`` | the converted model (quantize/dequantize in torch) | the output as the next layer sees it |
| ``edge`` | the Edge-dialect program (decomposed), in torch | per debug handle |
| ``portable`` | the ``.pte`` without delegates, in edgetorch's runtime (the reference kernels, ExecuTorch's quantized kernels) | per instruction (ETDump debug buffer) |
| ``xnnpack`` / ``ethos-u..`` / ``tosa`` / ``vgf`` | the delegated ``.pte``, in edgetorch's runtime (Arm delegates: their TOSA graph simulated) | per backend node (XNNPACK node, TOSA operator) |

At ``fake_quant`` each layer is also run *isolated*: fed the float model's inputs, so its SQNR
is the error it adds itself (its weights, its output quantizer), not what it inherits. Other
stages rank layers by the drop in SQNR against the previous stage between a layer's inputs
and its output (the error that stage's arithmetic adds at that layer).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...errors import EdgeTorchError, QuantDebugError
from .capture import capture, capture_handles, model_output
from .data import Sample, load_samples
from .layers import Layer, find_layers, handles_of
from .metrics import Accumulator, capped
from .recipes import Quantized, Recipe, lower, quantize
from .runtime_values import DEFAULT_DEBUG_BUFFER, RuntimeStage

log = logging.getLogger(__name__)

FLOAT, FAKE_QUANT, EDGE, PORTABLE = "float", "fake_quant", "edge", "portable"
CALIBRATION_SAMPLES = 32
OUTPUT = "__output__"  # the model output among a stage's float values


@dataclass
class StageValues:
    """What one stage gives for one sample: layer values and the model's output."""

    layers: dict[str, np.ndarray]
    output: np.ndarray | None


@dataclass
class _Stage:
    name: str
    run: Callable[[Sample, dict[str, np.ndarray]], StageValues]


@dataclass
class DebugRun:
    """Everything the flow built, kept for the report and for reuse (mixed precision)."""

    recipe: Recipe
    layers: list[Layer]
    stages: list[str]
    skipped: dict[str, str]
    vs_float: dict[tuple[str, str], Accumulator]
    vs_prev: dict[tuple[str, str], Accumulator]
    isolated: dict[str, Accumulator]
    outputs: dict[str, Accumulator]
    mismatched: dict[tuple[str, str], str] = field(default_factory=dict)
    samples: int = 0


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).numpy() if t.is_floating_point() else t.numpy()


def _aligned(value: np.ndarray, ref: np.ndarray) -> np.ndarray | None:
    """``value`` in ``ref``'s shape: as is, or reshaped row-major when only the shape differs
    (an Edge ``addmm`` on [B*S, N] for a linear on [B, S, N])."""
    if value.shape == ref.shape:
        return value
    if value.size == ref.size:
        return value.reshape(ref.shape)
    return None


def _torch_stages(float_ep: torch.export.ExportedProgram, quantized: Quantized,
                  layers: list[Layer], edge_gm: Any, edge_handles: dict[str, int]) -> list[_Stage]:
    float_gm = float_ep.module()
    quant_gm = quantized.exported.module()
    float_nodes = {layer.float_node for layer in layers}
    observed = {layer.observed for layer in layers}

    def run_float(sample: Sample, _: dict) -> StageValues:
        got = capture(float_gm, sample.inputs, float_nodes)
        return StageValues({la.name: _np(got[la.float_node]) for la in layers
                            if la.float_node in got}, _np(model_output(float_gm, sample.inputs)))

    def run_fake_quant(sample: Sample, _: dict) -> StageValues:
        got = capture(quant_gm, sample.inputs, observed)
        return StageValues({la.name: _np(got[la.observed]) for la in layers
                            if la.observed in got}, _np(model_output(quant_gm, sample.inputs)))

    stages = [_Stage(FLOAT, run_float)]
    if quantized.recipe.scheme != "fp32":
        stages.append(_Stage(FAKE_QUANT, run_fake_quant))
    if edge_gm is not None:
        wanted = {edge_handles[la.name] for la in layers if la.name in edge_handles}

        def run_edge(sample: Sample, _: dict) -> StageValues:
            by_handle = capture_handles(edge_gm, sample.inputs, wanted)
            return StageValues(_by_layer(layers, edge_handles, {
                h: _np(v) for h, v in by_handle.items()}),
                _np(model_output(edge_gm, sample.inputs)))

        stages.append(_Stage(EDGE, run_edge))
    return stages


def _by_layer(layers: list[Layer], handles: dict[str, int],
              by_handle: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    return {la.name: by_handle[handles[la.name]] for la in layers
            if la.name in handles and handles[la.name] in by_handle}


def _runtime_stage(name: str, et: Any, layers: list[Layer], handles: dict[str, int],
                   debug_buffer_size: int) -> _Stage:
    runner = RuntimeStage(et, debug_buffer_size)

    def run(sample: Sample, _: dict) -> StageValues:
        by_handle, out = runner.run([_np(t) if t.is_floating_point() else t.numpy()
                                     for t in sample.inputs])
        return StageValues(_by_layer(layers, handles, by_handle), out)

    return _Stage(name, run)


def _isolated(quantized: Quantized, layers: list[Layer]):
    quant_gm = quantized.exported.module()
    observed = {la.observed: la for la in layers}

    def run(sample: Sample, float_values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        replace = {name: torch.from_numpy(float_values[la.name]) for name, la in observed.items()
                   if la.name in float_values}
        got = capture(quant_gm, sample.inputs, set(replace), replace)
        return {observed[name].name: _np(v) for name, v in got.items()}

    return run


def _edge_program(quantized: Quantized, portable: bool, skipped: dict[str, str]
                  ) -> tuple[Any, dict[str, int] | None, Any]:
    """The Edge graph (a copy: ``to_executorch`` lowers the program in place), its debug
    handles by quantized-node name and, when ``portable``, the portable program; what fails
    is recorded in ``skipped``."""
    from ...exir import to_edge

    edge_gm = handles = None
    try:
        edge = to_edge(quantized.exported)
        handles = handles_of(edge.exported_program(), quantized.exported)
        edge_gm = edge.exported_program().module()
        return edge_gm, handles, edge.to_executorch() if portable else None
    except (EdgeTorchError, RuntimeError, NotImplementedError) as e:
        skipped[PORTABLE if edge_gm is not None else EDGE] = f"{type(e).__name__}: {e}"
        return edge_gm, handles, None


def build_stages(model: torch.nn.Module, example: tuple[torch.Tensor, ...], recipe: Recipe,
                 calibration: Sequence[Sample], *, qat_train: Any = None,
                 stages: Sequence[str] | None = None,
                 debug_buffer_size: int = DEFAULT_DEBUG_BUFFER, quantized: Quantized | None = None
                 ) -> tuple[list[Layer], list[_Stage], dict[str, str], Quantized, Any]:
    """Quantize (unless ``quantized`` is given), lower and load every stage of ``recipe``'s
    flow. Stages that cannot be built (a program the portable kernels cannot run...) are
    skipped with the reason."""
    float_ep = torch.export.export(model.eval(), example)
    quantized = quantized or quantize(recipe, model, example, calibration, qat_train)
    layers = find_layers(float_ep, quantized.exported)
    if not layers:
        raise QuantDebugError("no layer of the quantized program matches the float program; "
                              "is the model deterministic and exportable as given?")
    want = set(stages) if stages else None
    skipped: dict[str, str] = {}
    edge_gm = edge_handles = et_portable = None
    if want is None or want & {EDGE, PORTABLE}:
        edge_gm, edge_handles, et_portable = _edge_program(
            quantized, want is None or PORTABLE in want, skipped)
    result = _torch_stages(float_ep, quantized, layers, edge_gm, edge_handles or {})
    if et_portable is not None:
        result.append(_runtime_stage(PORTABLE, et_portable, layers, edge_handles or {},
                                     debug_buffer_size))
    if recipe.backend != "portable" and (want is None or recipe.backend in want):
        try:
            lowered = lower(recipe, quantized.exported)
            handles = handles_of(lowered.exported_program(), quantized.exported)
            result.append(_runtime_stage(recipe.backend, lowered.to_executorch(), layers,
                                         handles, debug_buffer_size))
        except (EdgeTorchError, RuntimeError, NotImplementedError) as e:
            skipped[recipe.backend] = f"{type(e).__name__}: {e}"
    if want is not None:
        result = [s for s in result if s.name in want or s.name == FLOAT]
    return layers, result, skipped, quantized, float_ep


def run_debug(model: torch.nn.Module, example: tuple[torch.Tensor, ...], samples: list[Sample],
              recipe: Recipe, calibration: Sequence[Sample], *, qat_train: Any = None,
              stages: Sequence[str] | None = None,
              debug_buffer_size: int = DEFAULT_DEBUG_BUFFER, progress: Any = None,
              quantized: Quantized | None = None) -> DebugRun:
    layers, built, skipped, quantized, _ = build_stages(
        model, example, recipe, calibration, qat_train=qat_train, stages=stages,
        debug_buffer_size=debug_buffer_size, quantized=quantized)
    names = [s.name for s in built]
    isolate = _isolated(quantized, layers) if FAKE_QUANT in names else None
    run = DebugRun(recipe, layers, names, skipped, {}, {}, {}, {})
    for sample in (progress(samples) if progress else samples):
        _accumulate(run, built, isolate, sample)
    return run


def _accumulate(run: DebugRun, built: list[_Stage], isolate: Any, sample: Sample) -> None:
    float_values: dict[str, np.ndarray] = {}
    prev: dict[str, np.ndarray] = {}
    qranges = {la.name: la.qrange for la in run.layers}
    for stage in built:
        got = stage.run(sample, float_values)
        if stage.name == FLOAT:
            float_values = got.layers
        for name, value in got.layers.items():
            ref = float_values.get(name)
            aligned = None if ref is None else _aligned(value, ref)
            if aligned is None:
                if ref is not None:
                    run.mismatched[(name, stage.name)] = f"{value.shape} vs {ref.shape}"
                continue
            run.vs_float.setdefault((name, stage.name), Accumulator()).add(
                ref, aligned, qranges.get(name))
            before = prev.get(name)
            if before is not None:
                run.vs_prev.setdefault((name, stage.name), Accumulator()).add(before, aligned)
            prev[name] = aligned
        if got.output is not None:
            if stage.name == FLOAT:
                float_values[OUTPUT] = got.output
            ref_out = float_values.get(OUTPUT)
            if ref_out is not None and got.output.size == ref_out.size:
                run.outputs.setdefault(stage.name, Accumulator()).add(
                    ref_out, got.output.reshape(ref_out.shape))
        if stage.name == FAKE_QUANT and isolate is not None:
            for name, value in isolate(sample, float_values).items():
                ref = float_values.get(name)
                if ref is not None and value.size == ref.size:
                    run.isolated.setdefault(name, Accumulator()).add(ref, value.reshape(ref.shape))
    run.samples += 1


def debug_quantization(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
                       data: Any, recipe: str | Recipe = "xnnpack:static", *,
                       calibration: Any = None, max_samples: int | None = 64,
                       targets: Any = None, stages: Sequence[str] | None = None,
                       qat_train: Any = None, debug_buffer_size: int = DEFAULT_DEBUG_BUFFER,
                       show_progress: bool = True):
    """Quantize ``model`` with ``recipe``, run every stage on ``data`` and compare each layer
    with the float model. Returns a :class:`~.report.QuantDebugReport`.

    ``data`` is a folder of ``.npy`` files, a DataLoader or an iterable (see :mod:`.data`);
    ``calibration`` (same forms) calibrates static quantization, by default the first
    ``CALIBRATION_SAMPLES`` samples of ``data``."""
    from .progress import progress_bar
    from .report import QuantDebugReport

    example = tuple(example_inputs)
    recipe = Recipe.parse(recipe) if isinstance(recipe, str) else recipe
    samples = load_samples(data, example, max_samples=max_samples, targets=targets)
    calib = load_samples(calibration, example) if calibration is not None \
        else samples[:CALIBRATION_SAMPLES]
    bar = (lambda it: progress_bar(it, desc="quant debug", total=len(samples), unit="sample")) \
        if show_progress else None
    run = run_debug(model, example, samples, recipe, calib, qat_train=qat_train, stages=stages,
                    debug_buffer_size=debug_buffer_size, progress=bar)
    return QuantDebugReport(run)


def isolated_sqnr(run: DebugRun, layer: str) -> float:
    acc = run.isolated.get(layer)
    return acc.sqnr() if acc is not None else math.nan


__all__ = ["FLOAT", "FAKE_QUANT", "EDGE", "PORTABLE", "DebugRun", "debug_quantization",
           "run_debug", "build_stages", "capped", "isolated_sqnr"]
