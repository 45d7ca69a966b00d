"""Utilities (``executorch.util``): the activation memory profiler; edgetorch's progress bars."""
