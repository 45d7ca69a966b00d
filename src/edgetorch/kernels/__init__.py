"""Kernels: NumPy implementations of the operators a ``.pte`` calls, keyed by operator string."""

from . import cortex_m as _cortex_m  # noqa: F401  (and the Q/DQ ops of Arm's aot_arm_compiler)
from . import llama as _llama  # noqa: F401  (and its LLM custom ops, llama::*)
from . import portable as _portable  # noqa: F401  (registers the portable library)
from . import quantized as _quantized  # noqa: F401  (and ExecuTorch's quantized library)
from .registry import KERNELS, KernelEntry, get_kernel, kernel, operator_names, register

__all__ = ["KERNELS", "KernelEntry", "get_kernel", "kernel", "operator_names", "register"]
