"""``edgetorch.export``: one call from a model to a program, configured by recipes
(ExecuTorch 1.5's ``executorch.export``; experimental there too).

    from edgetorch.export import export
    from edgetorch.backends.xnnpack.recipes import XNNPackRecipeType
    from edgetorch.export import ExportRecipe

    session = export(model, [example_inputs],
                     export_recipe=ExportRecipe.get_recipe(XNNPackRecipeType.FP32))
    session.save_to_pte("model.pte")
    session.run_method("forward", example_inputs)
"""

from .export import ExportSession, export
from .recipe import (
    AOQuantizationConfig,
    ExportRecipe,
    LoweringRecipe,
    Mode,
    QuantizationRecipe,
    RecipeType,
)
from .recipe_provider import BackendRecipeProvider
from .recipe_registry import recipe_registry
from .stages import PipelineArtifact
from .types import StageType

__all__ = [
    "AOQuantizationConfig",
    "BackendRecipeProvider",
    "ExportRecipe",
    "ExportSession",
    "LoweringRecipe",
    "Mode",
    "PipelineArtifact",
    "QuantizationRecipe",
    "RecipeType",
    "StageType",
    "export",
    "recipe_registry",
]
