"""Quantization you can trust: per-layer accuracy across every stage of the flow
(``debug_quantization``), automatic mixed precision (``mixed_precision``) and recipe sweeps
(``sweep``) that run in local processes or on Ray. ``edgetorch quant debug|mixed|sweep`` from
the shell; docs/devtools.md (Quantization debugging) walks through them. Names load on first use (the CLI imports
this package without torch)."""

from __future__ import annotations

from ...util.lazy_names import lazy_names

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

__all__ = sorted(LAZY_IMPORTS)
__getattr__, __dir__ = lazy_names(__name__, LAZY_IMPORTS)
