"""Quantization you can trust: per-layer accuracy across every stage of the flow
(``debug_quantization``), automatic mixed precision (``mixed_precision``) and recipe sweeps
(``sweep``) that run in local processes or on Ray. ``edgetorch quant debug|mixed|sweep`` from
the shell; docs/quant-debug.md walks through them. Names load on first use (the CLI imports
this package without torch)."""

from __future__ import annotations

import importlib
from typing import Any

LAZY_IMPORTS = {
    "Sample": ".data", "load_samples": ".data",
    "debug_quantization": ".debugger",
    "Target": ".metrics",
    "Recipe": ".recipes", "quantizer_calls": ".recipes",
    "EntryPoint": ".report", "QuantDebugReport": ".report",
    "MixedPrecisionResult": ".auto_mixed_precision",
    "mixed_precision": ".auto_mixed_precision",
    "SweepResult": ".recipe_sweep", "default_grid": ".recipe_sweep", "pareto": ".recipe_sweep",
    "sweep": ".recipe_sweep",
}
# (no submodule shares a name with a function here: importing a submodule sets the package
# attribute of its name, which would hide a function of that name from __getattr__)

__all__ = sorted(LAZY_IMPORTS)


def __getattr__(name: str) -> Any:
    if name in LAZY_IMPORTS:
        value = getattr(importlib.import_module(LAZY_IMPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(LAZY_IMPORTS))
