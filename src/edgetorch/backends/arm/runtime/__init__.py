"""The runtime half of the Arm backends (torch-free; tosa-tools from ``edgetorch[arm]``).

Importing it registers ``TOSABackend`` and ``VgfBackend``; tosa-tools itself is imported only
when a delegate is loaded, so this import is cheap and works without the extra.
"""

from . import (
    tosa_backend,  # noqa: F401  (registers "TOSABackend")
    vgf,  # noqa: F401  (registers "VgfBackend")
)
