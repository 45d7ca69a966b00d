"""Backends whose runtime half ships with edgetorch's runtime, as XNNPACK ships with
ExecuTorch's: importing ``edgetorch.runtime`` registers them, so a ``.pte`` that delegates to
them loads with no extra import. Their runtime halves are torch-free; others (the demo backend)
are registered by importing their package."""

from . import (
    openvino,  # noqa: F401  (registers "OpenvinoBackend"; usable with the extra)
    xnnpack,  # noqa: F401  (registers "XnnpackBackend")
)
