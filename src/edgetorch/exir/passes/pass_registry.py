"""``PassRegistry``: passes found by name (ExecuTorch's ``exir.passes.pass_registry``).

A name maps to a list of passes (functions ``gm -> PassResult | None`` or ``PassBase``
instances). Registering a name twice keeps the first list and warns, as ExecuTorch does.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

from ...errors import PassError


class PassRegistry:
    registry: ClassVar[dict[str, list[Any]]] = {}

    @classmethod
    def register(cls, pass_name: str | None = None) -> Callable[[Any], Any]:
        """Decorator: register a pass under ``pass_name`` (default: its name in snake_case)."""

        def wrapper(one_pass: Any) -> Any:
            key = pass_name or re.sub(r"(?<!^)(?=[A-Z])", "_", one_pass.__name__).lower()
            cls.register_list(key, [one_pass])
            return one_pass

        return wrapper

    @classmethod
    def register_list(cls, pass_name: str, pass_list: list[Any]) -> None:
        if pass_name in cls.registry:
            warnings.warn(f"Pass {pass_name} already exists inside of the PassRegistry. "
                          "Will ignore.", stacklevel=2)
            return
        cls.registry[pass_name] = list(pass_list)

    @classmethod
    def get(cls, key: str) -> list[Any]:
        if key not in cls.registry:
            raise PassError(f"no pass {key!r} in the PassRegistry; registered: "
                            f"{sorted(cls.registry)}. Register it with @PassRegistry.register()")
        return cls.registry[key]
