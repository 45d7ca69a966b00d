"""Backends whose runtime half ships with edgetorch's runtime, as XNNPACK ships with
ExecuTorch's: importing ``edgetorch.runtime`` registers them, so a ``.pte`` that delegates to
them loads with no extra import. Their runtime halves are torch-free; others (the demo backend)
are registered by importing their package."""

from . import (
    openvino,  # noqa: F401  (registers "OpenvinoBackend"; usable with the extra)
    vulkan,  # noqa: F401  (registers "VulkanBackend": a NumPy interpreter of its graphs)
    xnnpack,  # noqa: F401  (registers "XnnpackBackend")
)
from .apple import coreml as _coreml  # noqa: E402, F401  (registers "CoreMLBackend")

# The Arm runtimes: "TOSABackend", "VgfBackend" and "EthosUBackend" (simulations from the
# delegate's TOSA graph; the cortex_m kernels are in edgetorch.kernels); tosa-tools
# (edgetorch[arm]) is imported only when a delegate is loaded.
from .arm import runtime as _arm_runtime  # noqa: E402, F401
from .arm.runtime import ethosu as _ethosu  # noqa: E402, F401
