"""The registry of backend recipe providers (``recipe_registry``, one per process)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .recipe_provider import BackendRecipeProvider

if TYPE_CHECKING:
    from .recipe import ExportRecipe, RecipeType


class RecipeRegistry:
    """Providers by backend name, one registry per process (``RecipeRegistry()`` returns it).
    A backend registers on import of its ``recipes`` package
    (``import edgetorch.backends.xnnpack.recipes``), as ExecuTorch's do."""

    _instance: RecipeRegistry | None = None
    _initialized = False

    def __new__(cls) -> RecipeRegistry:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self) -> None:
        if not RecipeRegistry._initialized:  # constructing it again keeps what registered
            self._providers: dict[str, BackendRecipeProvider] = {}
            RecipeRegistry._initialized = True

    def register_backend_recipe_provider(self, provider: BackendRecipeProvider) -> None:
        self._providers[provider.backend_name] = provider

    def _provider(self, backend: str) -> BackendRecipeProvider:
        try:
            return self._providers[backend]
        except KeyError:
            raise ValueError(f"Backend '{backend}' not available. Available: "
                             f"{list(self._providers)} (import the backend's recipes package, e.g. "
                             "edgetorch.backends.xnnpack.recipes)") from None

    def create_recipe(self, recipe_type: RecipeType, backend: str, **kwargs: Any
                      ) -> ExportRecipe | None:
        return self._provider(backend).create_recipe(recipe_type, **kwargs)

    def get_supported_recipes(self, backend: str) -> Sequence[RecipeType]:
        return self._provider(backend).get_supported_recipes()

    def list_backends(self) -> Sequence[str]:
        return list(self._providers)


recipe_registry = RecipeRegistry()
