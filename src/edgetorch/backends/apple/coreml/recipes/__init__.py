"""Core ML's export recipes; importing this package registers them (as ExecuTorch's does)."""

from .....export import recipe_registry
from .coreml_recipe_provider import CoreMLRecipeProvider
from .coreml_recipe_types import COREML_BACKEND, CoreMLRecipeType

recipe_registry.register_backend_recipe_provider(CoreMLRecipeProvider())

__all__ = ["COREML_BACKEND", "CoreMLRecipeProvider", "CoreMLRecipeType"]
