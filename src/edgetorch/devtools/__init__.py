"""Developer tools (``executorch.devtools``): delegation reports in ``backend_debug``."""

from .bundled_program.core import BundledProgram  # noqa: E402,F401
