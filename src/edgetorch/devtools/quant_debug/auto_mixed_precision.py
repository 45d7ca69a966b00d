"""Automatic mixed precision: the fewest modules to keep float (or in a16w8 on Arm) so that a
metric on the user's evaluation data meets a target.

1. Rank the modules with weights by the error each adds itself (the debugger's isolated SQNR
   at ``fake_quant``, worst first).
2. Greedy: keep the top 0, 1, 2... of them float until the fake-quantized model (torch, fast)
   meets the target; then drop, one at a time, every kept module the target does not need.
3. Verify: lower the result and run the ``.pte`` in edgetorch's runtime; when the program
   misses the target, keep the next module float and verify again.

The answer comes with the quantizer calls that reproduce it (``set_module_type`` /
``set_module_name``, see :func:`~.recipes.quantizer_calls`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...errors import QuantDebugError
from .data import Sample, load_samples
from .debugger import CALIBRATION_SAMPLES, FAKE_QUANT, run_debug
from .evaluate import build, fake_quant_outputs, float_outputs, load, runtime_outputs
from .metrics import Target, resolve_metric
from .recipes import Quantized, Recipe, quantize, quantizer_calls
from .report import QuantDebugReport

RANKING_SAMPLES = 16  # samples the ranking run uses (isolated SQNR settles quickly)


@dataclass
class Trial:
    float_modules: tuple[str, ...]
    where: str  # "fake_quant" or "runtime"
    value: float
    met: bool


@dataclass
class MixedPrecisionResult:
    recipe: Recipe
    target: Target
    float_value: float
    value: float
    met: bool
    ranking: list[str]
    code: str
    trials: list[Trial] = field(default_factory=list)

    @property
    def float_modules(self) -> tuple[str, ...]:
        return self.recipe.float_modules

    def __str__(self) -> str:
        name = resolve_metric(self.target.metric)[0]
        kept = ", ".join(self.float_modules) or "none"
        state = "meets" if self.met else "does NOT meet"
        trials = [f"  {t.where:<10} float: {', '.join(t.float_modules) or '-':<24} {name} "
                  f"{t.value:.4g} ({'meets' if t.met else 'misses'})" for t in self.trials]
        return "\n".join([f"mixed precision for {self.target}: keep float {kept}; {name} "
                          f"{self.value:.4g} (float {self.float_value:.4g}) {state} the target "
                          f"in edgetorch's runtime after {len(self.trials)} trials:", *trials,
                          "Quantizer:", self.code])


class _Evaluator:
    def __init__(self, model: torch.nn.Module, example: tuple[torch.Tensor, ...],
                 samples: list[Sample], calibration: Sequence[Sample], target: Target,
                 qat_train: Any) -> None:
        self.model, self.example, self.samples = model, example, samples
        self.calibration, self.target, self.qat_train = calibration, target, qat_train
        _, self.metric = resolve_metric(target.metric)
        self.reference = float_outputs(model, samples)
        self.float_value = self.metric(self.reference, samples, self.reference)
        self.trials: list[Trial] = []
        self._quantized: dict[Recipe, Quantized] = {}

    def quantized(self, recipe: Recipe) -> Quantized:
        """``recipe`` applied, once: the ranking run, the greedy trials and the verification
        share it (calibration is deterministic, so a second run would give the same model)."""
        if recipe not in self._quantized:
            self._quantized[recipe] = quantize(recipe, self.model, self.example,
                                               self.calibration, self.qat_train)
        return self._quantized[recipe]

    def fake_quant(self, recipe: Recipe) -> float:
        outputs = fake_quant_outputs(self.quantized(recipe), self.samples)
        value = self.metric(outputs, self.samples, self.reference)
        self._record(recipe, FAKE_QUANT, value)
        return value

    def runtime(self, recipe: Recipe) -> float:
        built = build(recipe, self.model, self.example, self.calibration, self.qat_train,
                      quantized=self.quantized(recipe))
        outputs = runtime_outputs(load(built.pte, built.backend_options), self.samples)
        value = self.metric(outputs, self.samples, self.reference)
        self._record(recipe, "runtime", value)
        return value

    def _record(self, recipe: Recipe, where: str, value: float) -> None:
        self.trials.append(Trial(recipe.float_modules, where, value,
                                 self.target.met(value, self.float_value)))

    def met(self, value: float) -> bool:
        return self.target.met(value, self.float_value)


def rank_modules(model: torch.nn.Module, example: tuple[torch.Tensor, ...],
                 samples: Sequence[Sample], recipe: Recipe, calibration: Sequence[Sample],
                 qat_train: Any = None, quantized: Quantized | None = None) -> list[str]:
    """Modules with weights, worst isolated SQNR first (a float + fake_quant debugging run)."""
    run = run_debug(model, example, list(samples[:RANKING_SAMPLES]), recipe, calibration,
                    qat_train=qat_train, stages=("float", FAKE_QUANT), quantized=quantized)
    return QuantDebugReport(run).module_ranking(FAKE_QUANT)


def mixed_precision(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], data: Any,
                    target: str | Target, recipe: str | Recipe = "xnnpack:static", *,
                    calibration: Any = None, targets: Any = None, ranking: Sequence[str] | None
                    = None, max_float: int | None = None, verify: bool = True,
                    qat_train: Any = None, max_samples: int | None = None
                    ) -> MixedPrecisionResult:
    """Keep the fewest modules float (``recipe.fallback``: float or a16w8) so that ``target``
    holds on ``data`` (see the module docstring). ``ranking`` overrides the debugger's order."""
    example = tuple(example_inputs)
    target = Target.parse(target) if isinstance(target, str) else target
    base = Recipe.parse(recipe) if isinstance(recipe, str) else recipe
    if base.scheme == "fp32":
        raise QuantDebugError("mixed precision needs a quantized recipe, not fp32")
    samples = load_samples(data, example, max_samples=max_samples, targets=targets)
    calib = load_samples(calibration, example) if calibration is not None \
        else samples[:CALIBRATION_SAMPLES]
    ev = _Evaluator(model, example, samples, calib, target, qat_train)
    order = list(ranking) if ranking is not None else rank_modules(
        model, example, samples, base, calib, qat_train, ev.quantized(base))
    limit = len(order) if max_float is None else min(max_float, len(order))
    chosen = _greedy(ev, base, order, limit)
    if chosen is None:
        return _result(ev, base.with_float_modules(order[:limit]), order, math.nan, False)
    chosen = _prune(ev, base, chosen)
    if not verify:
        value = ev.trials[-1].value
        return _result(ev, base.with_float_modules(chosen), order, value, ev.met(value))
    return _verify(ev, base, order, chosen, limit)


def _greedy(ev: _Evaluator, base: Recipe, order: list[str], limit: int) -> list[str] | None:
    for k in range(limit + 1):
        if ev.met(ev.fake_quant(base.with_float_modules(order[:k]))):
            return order[:k]
    return None


def _prune(ev: _Evaluator, base: Recipe, chosen: list[str]) -> list[str]:
    """Drop every kept module the target does not need (least harmful first)."""
    kept = list(chosen)
    for name in reversed(chosen[:-1] if len(chosen) > 1 else []):
        trial = [m for m in kept if m != name]
        if ev.met(ev.fake_quant(base.with_float_modules(trial))):
            kept = trial
    return kept


def _verify(ev: _Evaluator, base: Recipe, order: list[str], chosen: list[str],
            limit: int) -> MixedPrecisionResult:
    kept = list(chosen)
    rest = [m for m in order[:limit] if m not in kept]
    while True:
        recipe = base.with_float_modules(kept)
        value = ev.runtime(recipe)
        if ev.met(value) or not rest:
            return _result(ev, recipe, order, value, ev.met(value))
        kept.append(rest.pop(0))


def _result(ev: _Evaluator, recipe: Recipe, order: list[str], value: float,
            met: bool) -> MixedPrecisionResult:
    return MixedPrecisionResult(recipe, ev.target, ev.float_value, value, met, order,
                                quantizer_calls(recipe, ev.model), list(ev.trials))
