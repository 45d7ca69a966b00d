"""Export recipes: what ``edgetorch.export.export`` does to a model (ExecuTorch 1.5's
``executorch.export.recipe``: ``ExportRecipe``, ``QuantizationRecipe``, ``LoweringRecipe``,
``RecipeType``, ``ExportRecipe.get_recipe`` and ``ExportRecipe.combine``)."""

from __future__ import annotations

import copy
import dataclasses
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, EnumMeta
from typing import Any

from ..exir import EdgeCompileConfig, ExecutorchBackendConfig
from ..exir._warnings import experimental
from .types import StageType

EXPERIMENTAL = ("This API and all of its related functionality such as ExportSession and "
                "ExportRecipe are experimental.")


class RecipeTypeMeta(EnumMeta, ABCMeta):
    pass


class RecipeType(Enum, metaclass=RecipeTypeMeta):
    """Backends define their recipe types as subclasses (``XNNPackRecipeType``)."""

    @classmethod
    @abstractmethod
    def get_backend_name(cls) -> str:
        """The backend whose provider creates these recipes (``"xnnpack"``)."""


class Mode(str, Enum):
    DEBUG = "debug"
    RELEASE = "release"


@dataclass
class AOQuantizationConfig:
    """A torchao ``AOBaseConfig`` applied with ``quantize_`` (optionally filtered)."""

    ao_base_config: Any
    filter_fn: Callable[[Any, str], bool] | None = None


GraphPass = Callable[[Any], Any]  # GraphModule -> GraphModule


@dataclass
class QuantizationRecipe:
    """PT2E quantizers (prepare -> calibrate or train -> convert) and/or torchao configs."""

    quantizers: list[Any] | None = None
    ao_quantization_configs: list[AOQuantizationConfig] | None = None
    is_qat: bool = False
    dynamic_batch_size: bool = False
    calibration_inputs_fn: Callable[[], Iterable[tuple]] | None = None
    train_fn: Callable[[Any], None] | None = None
    pre_prepare_passes: list[GraphPass] | None = None
    post_prepare_passes: list[GraphPass] | None = None
    pre_convert_passes: list[GraphPass] | None = None
    post_convert_passes: list[GraphPass] | None = None

    def get_quantizers(self) -> list[Any] | None:
        return self.quantizers


@dataclass
class LoweringRecipe:
    """Partitioners (a list for every method or ``{method: [...]}``), Edge passes, config."""

    partitioners: list[Any] | dict[str, list[Any]] | None = None
    # each (method_name, exported_program) -> list of passes
    edge_transform_passes: list[Callable[[str, Any], list[Any]]] | None = None
    # each EdgeProgramManager -> list of passes, run after lowering
    edge_manager_transform_passes: list[Callable[[Any], list[Any]]] | None = None
    edge_compile_config: EdgeCompileConfig | None = None


_QUANT_LISTS = ("quantizers", "ao_quantization_configs", "pre_prepare_passes",
                "post_prepare_passes", "pre_convert_passes", "post_convert_passes")


@experimental(EXPERIMENTAL)
@dataclass
class ExportRecipe:
    """How to export: quantization, ATen passes, lowering, ``ExecutorchBackendConfig``, the
    stages to run (default: chosen from the model's type), ``strict`` for ``torch.export``."""

    name: str | None = None
    quantization_recipe: QuantizationRecipe | None = None
    aten_transform_passes: list[Callable[[str, Any], Any]] | None = None
    source_transform_in_place: bool = False
    lowering_recipe: LoweringRecipe | None = None
    executorch_backend_config: ExecutorchBackendConfig | None = None
    pipeline_stages: list[StageType] | None = None
    mode: Mode = Mode.RELEASE
    strict: bool = True

    @classmethod
    def get_recipe(cls, recipe: RecipeType, **kwargs: Any) -> ExportRecipe:
        """The recipe ``recipe``'s backend provides (its recipes package must be imported)."""
        from .recipe_registry import recipe_registry

        if not isinstance(recipe, RecipeType):
            raise ValueError(f"Invalid recipe type: {recipe}")
        backend = recipe.get_backend_name()
        made = recipe_registry.create_recipe(recipe, backend, **kwargs)
        if made is None:
            supported = recipe_registry.get_supported_recipes(backend)
            raise ValueError(f"Recipe '{recipe.value}' not supported by '{backend}'. "
                             f"Supported: {[r.value for r in supported]}")
        return made

    @classmethod
    def combine(cls, recipes: list[ExportRecipe], recipe_name: str | None = None) -> ExportRecipe:
        """One recipe doing what each does: partitioners tried in the given order, quantizers
        composed, passes concatenated; scalar fields and edge configs must agree."""
        if not recipes:
            raise ValueError("Recipes cannot be empty")
        if len(recipes) == 1:
            return recipes[0]
        for name in ("strict", "mode", "source_transform_in_place"):
            _agree(name, [getattr(r, name) for r in recipes])
        _agree("pipeline_stages", [tuple(r.pipeline_stages) if r.pipeline_stages else None
                                   for r in recipes])
        backend_config = next((copy.deepcopy(r.executorch_backend_config) for r in recipes
                               if r.executorch_backend_config), None)
        return cls(
            name=recipe_name or "_".join(r.name for r in recipes if r.name is not None),
            quantization_recipe=_combine_quantization([r.quantization_recipe for r in recipes]),
            aten_transform_passes=[p for r in recipes for p in r.aten_transform_passes or []] or None,
            lowering_recipe=_combine_lowering(recipes),
            executorch_backend_config=backend_config,
            pipeline_stages=next((r.pipeline_stages for r in recipes if r.pipeline_stages), None),
            mode=recipes[0].mode, strict=recipes[0].strict,
            source_transform_in_place=recipes[0].source_transform_in_place)


def _agree(name: str, values: list[Any]) -> None:
    if len(set(values)) > 1:
        raise ValueError(f"Cannot combine recipes with conflicting '{name}' values: {set(values)}")


def _combine_quantization(recipes: list[QuantizationRecipe | None]) -> QuantizationRecipe | None:
    present = [q for q in recipes if q is not None]
    if not present:
        return None
    _agree("is_qat", [q.is_qat for q in present])
    train_fns = [q.train_fn for q in present if q.train_fn is not None]
    if len(train_fns) > 1:
        raise ValueError("Cannot combine recipes: more than one recipe provides a train_fn.")
    lists = {name: [x for q in present for x in getattr(q, name) or []] for name in _QUANT_LISTS}
    if not any(lists.values()):
        return None
    calib = [q.calibration_inputs_fn for q in present if q.calibration_inputs_fn is not None]

    def chained() -> Iterable[tuple]:
        for fn in calib:
            yield from fn()

    return QuantizationRecipe(
        **{name: value or None for name, value in lists.items()}, is_qat=present[0].is_qat,
        dynamic_batch_size=any(q.dynamic_batch_size for q in present),
        train_fn=train_fns[0] if train_fns else None,
        calibration_inputs_fn=(chained if len(calib) > 1 else calib[0]) if calib else None)


def _combine_lowering(recipes: list[ExportRecipe]) -> LoweringRecipe | None:
    lowerings = [r.lowering_recipe for r in recipes if r.lowering_recipe is not None]
    as_list: list[Any] = []
    by_method: dict[str, list[Any]] = {}
    for lr in lowerings:
        if isinstance(lr.partitioners, dict):
            for method, parts in lr.partitioners.items():
                by_method.setdefault(method, []).extend(parts)
        else:
            as_list.extend(lr.partitioners or [])
    if as_list and by_method:
        raise ValueError("Cannot combine recipes that mix list-valued and dict-valued "
                         "partitioners; convert the list-valued recipe to per-method form.")
    configs: list[EdgeCompileConfig] = []
    for lr in lowerings:
        cfg = lr.edge_compile_config
        if cfg is not None and not any(_same_config(cfg, seen) for seen in configs):
            configs.append(cfg)
    if len(configs) > 1:
        differ = [f.name for f in dataclasses.fields(configs[0])
                  if len({repr(getattr(c, f.name)) for c in configs}) > 1]
        raise ValueError(f"Cannot combine recipes whose edge_compile_configs disagree on {differ}")
    edge_passes = [p for lr in lowerings for p in lr.edge_transform_passes or []]
    manager_passes = [p for lr in lowerings for p in lr.edge_manager_transform_passes or []]
    if not (as_list or by_method or edge_passes or manager_passes or configs):
        return None
    return LoweringRecipe(partitioners=by_method or as_list or None,
                          edge_transform_passes=edge_passes or None,
                          edge_manager_transform_passes=manager_passes or None,
                          edge_compile_config=copy.deepcopy(configs[0]) if configs
                          else EdgeCompileConfig())


def _same_config(a: EdgeCompileConfig, b: EdgeCompileConfig) -> bool:
    def key(c: EdgeCompileConfig) -> tuple:
        return tuple(frozenset(map(str, v)) if isinstance(v, list) else v
                     for v in (getattr(c, f.name) for f in dataclasses.fields(c)))
    return a is b or key(a) == key(b)
