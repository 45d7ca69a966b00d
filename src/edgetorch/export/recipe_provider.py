"""``BackendRecipeProvider``: what a backend implements to offer recipes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .recipe import ExportRecipe, RecipeType


class BackendRecipeProvider(ABC):
    @property
    @abstractmethod
    def backend_name(self) -> str:
        """Name of the backend (``"xnnpack"``); recipe types name it in ``get_backend_name``."""

    @abstractmethod
    def get_supported_recipes(self) -> Sequence[RecipeType]:
        """The recipe types this provider creates."""

    @abstractmethod
    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> ExportRecipe | None:
        """The recipe for ``recipe_type``, or None when the type is not this backend's."""

    def supports_recipe(self, recipe_type: RecipeType) -> bool:
        return recipe_type in self.get_supported_recipes()
