"""Running a model on samples at the stages mixed precision and sweeps score: the float model,
the fake-quantized one (fast, in torch), and the lowered ``.pte`` in edgetorch's runtime."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...runtime import Runtime
from .capture import model_output
from .data import Sample
from .recipes import Quantized, Recipe, is_arm, lower, quantize


def float_outputs(model: torch.nn.Module, samples: Sequence[Sample]) -> list[np.ndarray]:
    model = model.eval()
    return [model_output(model, s.inputs).float().numpy() for s in samples]


def fake_quant_outputs(quantized: Quantized, samples: Sequence[Sample]) -> list[np.ndarray]:
    module = quantized.exported.module()
    return [model_output(module, s.inputs).float().numpy() for s in samples]


@dataclass
class Built:
    """A recipe applied and lowered to a program."""

    quantized: Quantized
    pte: bytes
    planned_bytes: int
    edge: Any
    et: Any
    backend_options: dict[str, Any] | None = None


def build(recipe: Recipe, model: torch.nn.Module, example: tuple[torch.Tensor, ...],
          calibration: Sequence[Sample], qat_train: Any = None,
          intermediates: str | None = None, quantized: Quantized | None = None) -> Built:
    """Quantize (unless ``quantized`` is given), lower and serialize ``model`` by ``recipe``."""
    quantized = quantized or quantize(recipe, model, example, calibration, qat_train)
    edge = lower(recipe, quantized.exported, intermediates=intermediates)
    et = edge.to_executorch()
    planned = sum(sum(p.non_const_buffer_sizes[1:]) for p in
                  et.executorch_program.execution_plan)
    options = {"EthosUBackend": {"intermediates": intermediates}} \
        if is_arm(recipe.backend) and intermediates else None
    return Built(quantized, et.buffer, int(planned), edge, et, options)


def _numpy_inputs(sample: Sample) -> list[np.ndarray]:
    return [t.detach().numpy() for t in sample.inputs]


def load(pte: bytes, backend_options: dict | None = None) -> Any:
    return Runtime.get().load_program(pte, backend_options=backend_options).load_method("forward")


def runtime_outputs(method: Any, samples: Sequence[Sample]) -> list[np.ndarray]:
    out = []
    for s in samples:
        result = method.execute(_numpy_inputs(s))
        out.append(np.asarray(result[0], dtype=np.float32).copy())
    return out


def latency(methods: Sequence[Any], sample: Sample, repeat: int = 5,
            warmup: int = 3) -> list[float]:
    """Seconds per execute of each method on one sample: after ``warmup`` untimed runs (a
    delegate builds its plan in its first calls), the methods run in turn ``repeat`` times
    and each keeps its fastest run (the least disturbed by other work on the machine)."""
    inputs = _numpy_inputs(sample)
    for method in methods:
        for _ in range(warmup):
            method.execute(inputs)
    best = [math.inf] * len(methods)
    for _ in range(max(1, repeat)):
        for k, method in enumerate(methods):
            start = time.perf_counter()
            method.execute(inputs)
            best[k] = min(best[k], time.perf_counter() - start)
    return best
