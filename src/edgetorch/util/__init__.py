"""Utilities (``executorch.util``): the activation memory profiler."""
