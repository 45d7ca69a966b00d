"""XNNPACK's export recipes; importing this package registers them (as ExecuTorch's does)."""

from ....export import recipe_registry
from .xnnpack_recipe_provider import XNNPACKRecipeProvider
from .xnnpack_recipe_types import XNNPackRecipeType

recipe_registry.register_backend_recipe_provider(XNNPACKRecipeProvider())

__all__ = ["XNNPACKRecipeProvider", "XNNPackRecipeType"]
