"""Quantization you can trust: per-layer accuracy across every stage of the flow
(``debug_quantization``), automatic mixed precision (``mixed_precision``) and recipe sweeps
(``sweep``) that run in local processes or on Ray. ``edgetorch quant debug|sweep`` from the
shell; docs/quant-debug.md walks through them."""

from .data import Sample, load_samples
from .debugger import debug_quantization
from .metrics import Target
from .recipes import Recipe, quantizer_calls
from .report import EntryPoint, QuantDebugReport

__all__ = ["EntryPoint", "QuantDebugReport", "Recipe", "Sample", "Target", "debug_quantization",
           "load_samples", "quantizer_calls"]
