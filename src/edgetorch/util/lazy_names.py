"""Names a package exports without importing them up front: a module-level ``__getattr__`` and
``__dir__`` (PEP 562) that import each name's submodule on first use, so importing the package
stays cheap (and torch-free where its CLI parser needs that)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, table: Mapping[str, str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps an exported name to the
    relative module defining it (``{"sweep": ".recipe_sweep"}``). A name is imported once and
    then kept in the package's namespace. No submodule may share a name with an export: its
    import would set the package attribute of that name to the module."""

    def __getattr__(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(table[name], package), name)
            vars(sys.modules[package])[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
