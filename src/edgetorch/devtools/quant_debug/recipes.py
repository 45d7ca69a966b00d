"""Quantization recipes: what to quantize how, and for which backend; the flows that apply them.

A :class:`Recipe` is a plain value (it travels to worker processes and Ray tasks, and its
:attr:`Recipe.key` names a sweep's row):

| scheme | what | backends |
|---|---|---|
| ``fp32`` | no quantization | ``portable``, ``xnnpack`` |
| ``static`` / ``qat`` | PT2E: int8 activations, int8 weights per channel or per tensor | all |
| ``dynamic`` | PT2E: activations quantized at run time (linear / conv) | ``portable``, ``xnnpack`` |
| ``8da4w`` / ``8da8w`` | torchao: int8 per-token activations, int4 (groups) / int8 weights | ``xnnpack`` |

Arm targets (``ethos-u55-128``, ``ethos-u85-256``, ..., ``tosa``, ``vgf``) need the ``arm`` extra
(tosa-tools, Vela; ``vgf`` also the ``vgf`` extra's model converter).
``float_modules`` keeps those submodules float (mixed precision); with ``fallback="a16w8"`` they
take the Arm quantizer's 16-bit-activation config (16A8W) instead (Arm backends only).
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ...errors import FeatureNotAvailableError, QuantDebugError

SCHEMES = ("fp32", "static", "dynamic", "qat", "8da4w", "8da8w")
PT2E_SCHEMES = ("static", "dynamic", "qat")
CPU_BACKENDS = ("portable", "xnnpack")
DEFAULT_GROUP_SIZE = 32
FALLBACKS = ("float", "a16w8")


def arm_available() -> bool:
    """Whether the Arm flow can run here (tosa-tools' serializer and Vela importable)."""
    return all(importlib.util.find_spec(m) is not None for m in ("tosa_serializer", "ethosu"))


def is_arm(backend: str) -> bool:
    return backend.startswith("ethos-u") or backend in ("tosa", "vgf")


@dataclass(frozen=True)
class Recipe:
    """One way to quantize and lower a model (see the module docstring)."""

    scheme: str = "static"
    backend: str = "xnnpack"
    per_channel: bool = True
    group_size: int | None = None
    float_modules: tuple[str, ...] = ()
    fallback: str = "float"
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise QuantDebugError(f"unknown scheme {self.scheme!r}; use one of {SCHEMES}")
        if self.backend not in CPU_BACKENDS and not is_arm(self.backend):
            raise QuantDebugError(f"unknown backend {self.backend!r}; use one of "
                                  f"{CPU_BACKENDS}, 'tosa', 'vgf' or an Ethos-U target "
                                  "(ethos-u55-128)")
        if self.scheme in ("8da4w", "8da8w") and self.backend != "xnnpack":
            raise QuantDebugError(f"{self.scheme} runs on XNNPACK only (its int4/int8 "
                                  "per-token linear); use backend 'xnnpack'")
        if is_arm(self.backend) and self.scheme not in ("static", "qat"):
            raise QuantDebugError(f"{self.backend} takes static (or qat) int8 quantization, "
                                  f"not {self.scheme}")
        if self.fallback not in FALLBACKS:
            raise QuantDebugError(f"fallback {self.fallback!r} is not one of {FALLBACKS}")

    @property
    def key(self) -> str:
        """A short unique name: ``xnnpack/static/pc``, ``xnnpack/8da4w/g64``, ..."""
        parts = [self.backend, self.scheme]
        if self.scheme in PT2E_SCHEMES:
            parts.append("pc" if self.per_channel else "pt")
        if self.scheme == "8da4w":
            parts.append(f"g{self.group_size or DEFAULT_GROUP_SIZE}")
        if self.float_modules:
            keep = "a16w8" if self.fallback == "a16w8" else "float"
            parts.append(f"{keep}={','.join(self.float_modules)}")
        return "/".join(parts)

    @classmethod
    def parse(cls, text: str) -> Recipe:
        """``backend:scheme[:pc|pt|gN]``, e.g. ``xnnpack:static:pt``, ``xnnpack:8da4w:g64``."""
        parts = [p for p in text.strip().split(":") if p]
        if len(parts) < 2:
            raise QuantDebugError(f"recipe {text!r} is not 'backend:scheme[:pc|pt|gN]' "
                                  "(e.g. xnnpack:static, xnnpack:8da4w:g64, portable:fp32)")
        kw: dict[str, Any] = {"backend": parts[0], "scheme": parts[1]}
        for opt in parts[2:]:
            if opt in ("pc", "pt"):
                kw["per_channel"] = opt == "pc"
            elif opt.startswith("g") and opt[1:].isdigit():
                kw["group_size"] = int(opt[1:])
            else:
                raise QuantDebugError(f"recipe {text!r}: unknown option {opt!r} (pc, pt, gN)")
        return cls(**kw)

    def with_float_modules(self, names: Iterable[str]) -> Recipe:
        return replace(self, float_modules=tuple(names))


@dataclass
class Quantized:
    """A recipe applied: the eager (fake-quantized) module and its export."""

    recipe: Recipe
    module: torch.nn.Module
    exported: torch.export.ExportedProgram


# ---- quantizers -------------------------------------------------------------------------------


def _quantization_config(recipe: Recipe) -> Any:
    dynamic, qat = recipe.scheme == "dynamic", recipe.scheme == "qat"
    if is_arm(recipe.backend):
        from ...backends.arm.quantizer import get_symmetric_quantization_config
    else:
        from ...backends.xnnpack.quantizer.xnnpack_quantizer import (
            get_symmetric_quantization_config,
        )
    return get_symmetric_quantization_config(is_per_channel=recipe.per_channel, is_qat=qat,
                                             is_dynamic=dynamic)


def fallback_config(recipe: Recipe) -> Any:
    """The config layers in ``float_modules`` take: None (float), or Arm's a16w8."""
    if recipe.fallback == "float":
        return None
    if not is_arm(recipe.backend):
        raise FeatureNotAvailableError(
            f"fallback='a16w8' is the Arm quantizer's int16-activation config; backend "
            f"{recipe.backend!r} has none: use an Arm backend or fallback='float'")
    from ...backends.arm.quantizer.quantization_config import (
        get_symmetric_a16w8_quantization_config,
    )

    return get_symmetric_a16w8_quantization_config(is_per_channel=recipe.per_channel)


def _base_quantizer(recipe: Recipe) -> Any:
    if is_arm(recipe.backend):
        from ...backends.arm.quantizer import EthosUQuantizer, TOSAQuantizer, VgfQuantizer

        spec = arm_compile_spec(recipe.backend)
        cls = {"tosa": TOSAQuantizer, "vgf": VgfQuantizer}.get(recipe.backend, EthosUQuantizer)
        return cls(spec)
    from ...backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer

    return XNNPACKQuantizer()


def module_types(model: torch.nn.Module) -> dict[str, type]:
    return {name: type(m) for name, m in model.named_modules() if name}


def make_quantizer(recipe: Recipe, model: torch.nn.Module) -> Any:
    """The PT2E quantizer of ``recipe``, built with exactly the calls
    :func:`quantizer_calls` prints."""
    quantizer = _base_quantizer(recipe)
    config = _quantization_config(recipe)
    quantizer.set_global(config)
    for method, args in _mixed_precision_calls(recipe, model):
        resolved = [config if a is _CONFIG else fallback_config(recipe) if a is _FALLBACK else a
                    for a in args]
        getattr(quantizer, method)(*resolved)
    return quantizer


_CONFIG, _FALLBACK = object(), object()


def _mixed_precision_calls(recipe: Recipe, model: torch.nn.Module
                           ) -> list[tuple[str, tuple[Any, ...]]]:
    """The ``set_module_type`` / ``set_module_name`` calls that keep ``float_modules`` out.

    A ``None`` config is refused by name (ExecuTorch's rule), so a float module's whole type is
    set to ``None`` and its quantized siblings of that type are named back in. A fallback
    config (a16w8) is set by name directly.
    """
    if not recipe.float_modules:
        return []
    types = module_types(model)
    unknown = [n for n in recipe.float_modules if n not in types]
    if unknown:
        raise QuantDebugError(f"float_modules {unknown} are not submodules of the model (it has "
                              f"{sorted(types)[:12]}...)")
    if recipe.fallback != "float":
        return [("set_module_name", (n, _FALLBACK)) for n in recipe.float_modules]
    calls: list[tuple[str, tuple[Any, ...]]] = []
    keep = set(recipe.float_modules)
    for tp in dict.fromkeys(types[n] for n in recipe.float_modules):
        calls.append(("set_module_type", (tp, None)))
        for name, other in types.items():
            if other is tp and name not in keep and not _inside(name, keep):
                calls.append(("set_module_name", (name, _CONFIG)))
    return calls


def _inside(name: str, parents: set[str]) -> bool:
    return any(name.startswith(p + ".") for p in parents)


def quantizer_calls(recipe: Recipe, model: torch.nn.Module) -> str:
    """Python that builds the quantizer of ``recipe`` (what to paste into an export script)."""
    if recipe.scheme in ("8da4w", "8da8w"):
        return _torchao_code(recipe)
    if recipe.scheme == "fp32":
        return "# fp32: no quantizer"
    arm = is_arm(recipe.backend)
    cls = {"tosa": "TOSAQuantizer", "vgf": "VgfQuantizer"}.get(recipe.backend, "EthosUQuantizer") \
        if arm else "XNNPACKQuantizer"
    lines = [f"config = get_symmetric_quantization_config(is_per_channel={recipe.per_channel}"
             + (", is_dynamic=True" if recipe.scheme == "dynamic" else "")
             + (", is_qat=True" if recipe.scheme == "qat" else "") + ")"]
    if recipe.fallback == "a16w8" and recipe.float_modules:
        lines.append("a16w8 = get_symmetric_a16w8_quantization_config()")
    ctor = f"{cls}(compile_spec)" if arm else f"{cls}()"
    lines.append(f"quantizer = {ctor}.set_global(config)")
    for method, args in _mixed_precision_calls(recipe, model):
        shown = [_code(a) for a in args]
        lines.append(f"quantizer.{method}({', '.join(shown)})")
    return "\n".join(lines)


def _code(arg: Any) -> str:
    if arg is _CONFIG:
        return "config"
    if arg is _FALLBACK:
        return "a16w8"
    if isinstance(arg, type):
        if getattr(torch.nn, arg.__qualname__, None) is arg:
            return f"torch.nn.{arg.__qualname__}"
        return f"{arg.__module__}.{arg.__qualname__}"
    return repr(arg)


def _torchao_code(recipe: Recipe) -> str:
    gs = recipe.group_size or DEFAULT_GROUP_SIZE
    bits = "torch.int4" if recipe.scheme == "8da4w" else "torch.int8"
    gran = f"PerGroup({gs})" if recipe.scheme == "8da4w" else "PerAxis(0)"
    skip = f" and fqn not in {set(recipe.float_modules)!r}" if recipe.float_modules else ""
    div = f" and m.in_features % {gs} == 0" if recipe.scheme == "8da4w" else ""
    return (f"quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype={bits}, "
            f"weight_granularity={gran}),\n          filter_fn=lambda m, fqn: isinstance(m, "
            f"torch.nn.Linear){div}{skip})")


# ---- applying a recipe ------------------------------------------------------------------------

QatTrain = Callable[[torch.fx.GraphModule, Sequence[Any]], None]


def quantize(recipe: Recipe, model: torch.nn.Module, example: tuple[torch.Tensor, ...],
             calibration: Sequence[Any], qat_train: QatTrain | None = None) -> Quantized:
    """``model`` quantized by ``recipe`` (calibrated on ``calibration`` samples) and exported.
    The model itself is not changed."""
    model = model.eval()
    if recipe.scheme == "fp32":
        return Quantized(recipe, model, torch.export.export(model, example))
    if recipe.scheme in ("8da4w", "8da8w"):
        return _torchao(recipe, model, example)
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )

    quantizer = make_quantizer(recipe, model)
    if recipe.scheme == "qat":
        if qat_train is None:
            raise QuantDebugError("the qat scheme needs a training function: qat_train("
                                  "prepared_module, samples) that runs a few steps")
        # torchao's train -> inference switch for a prepared graph (batch norm, dropout): not
        # Python's eval, nothing from a file is run
        from torchao.quantization.pt2e import move_exported_model_to_eval as inference_mode

        prepared = prepare_qat_pt2e(torch.export.export(copy.deepcopy(model).train(),
                                                        example).module(), quantizer)
        qat_train(prepared, calibration)
        inference_mode(prepared)
    else:
        prepared = prepare_pt2e(torch.export.export(model, example).module(), quantizer)
        with torch.no_grad():
            for sample in calibration:
                prepared(*sample.inputs)
    converted = convert_pt2e(prepared)
    if recipe.scheme == "dynamic":
        from ...backends.transforms.duplicate_dynamic_quant_chain import (
            DuplicateDynamicQuantChainPass,
        )

        DuplicateDynamicQuantChainPass()(converted)
    return Quantized(recipe, converted, torch.export.export(converted, example))


def _torchao(recipe: Recipe, model: torch.nn.Module, example: tuple[torch.Tensor, ...]
             ) -> Quantized:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    gs = recipe.group_size or DEFAULT_GROUP_SIZE
    if recipe.scheme == "8da4w":
        config = Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                       weight_granularity=PerGroup(gs))
    else:
        config = Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int8,
                                                       weight_granularity=PerAxis(0))
    keep = set(recipe.float_modules)
    module = copy.deepcopy(model)

    def chosen(m: torch.nn.Module, fqn: str) -> bool:
        return (isinstance(m, torch.nn.Linear) and fqn not in keep
                and (recipe.scheme != "8da4w" or m.in_features % gs == 0))

    quantize_(module, config, filter_fn=chosen)
    return Quantized(recipe, module, torch.export.export(module, example))


def arm_compile_spec(backend: str, intermediates: str | None = None) -> Any:
    if backend == "tosa":
        from ...backends.arm.tosa.compile_spec import TosaCompileSpec

        spec = TosaCompileSpec("TOSA-1.0+INT")
    elif backend == "vgf":
        from ...backends.arm.vgf.compile_spec import VgfCompileSpec

        spec = VgfCompileSpec("TOSA-1.0+INT")
    else:
        from ...backends.arm.ethosu.compile_spec import TARGETS, EthosUCompileSpec

        if backend not in TARGETS:
            raise QuantDebugError(f"unknown Ethos-U target {backend!r}; use one of "
                                  f"{sorted(TARGETS)}")
        spec = EthosUCompileSpec(backend)
    if intermediates:
        spec.dump_intermediate_artifacts_to(intermediates)
    return spec


def lower(recipe: Recipe, exported: torch.export.ExportedProgram, *,
          intermediates: str | None = None) -> Any:
    """The Edge program of ``exported`` for ``recipe.backend`` (delegated where it has one)."""
    from ...exir import to_edge, to_edge_transform_and_lower

    if recipe.backend == "portable":
        return to_edge(exported)
    if recipe.backend == "xnnpack":
        from ...backends.xnnpack.partition import XnnpackPartitioner

        return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    spec = arm_compile_spec(recipe.backend, intermediates)
    if recipe.backend == "tosa":
        from ...backends.arm.tosa.partitioner import TOSAPartitioner

        partitioner: Any = TOSAPartitioner(spec)
    elif recipe.backend == "vgf":
        from ...backends.arm.vgf import VgfPartitioner

        partitioner = VgfPartitioner(spec)
    else:
        from ...backends.arm.ethosu import EthosUPartitioner

        partitioner = EthosUPartitioner(spec)
    return to_edge_transform_and_lower(exported, partitioner=[partitioner])
