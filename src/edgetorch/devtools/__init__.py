"""Developer tools (``executorch.devtools``): delegation reports in ``backend_debug``."""
