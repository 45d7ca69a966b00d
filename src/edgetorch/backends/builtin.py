"""Backends whose runtime half ships with edgetorch's runtime, as XNNPACK ships with
ExecuTorch's: importing ``edgetorch.runtime`` registers them, so a ``.pte`` that delegates to
them loads with no extra import. Their runtime halves are torch-free; others (the demo backend)
are registered by importing their package."""

from . import xnnpack  # noqa: F401  (registers "XnnpackBackend")

# "EthosUBackend": a simulation from the delegate's TOSA graph; needs edgetorch[arm] at init.
from .arm.runtime import cortex_m_kernels as _cortex_m  # noqa: F401
from .arm.runtime import ethosu as _ethosu  # noqa: F401
