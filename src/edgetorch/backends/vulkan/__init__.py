"""The Vulkan backend, at ExecuTorch 1.5.1's names (``executorch.backends.vulkan``).

Compiler half (torch; loaded on first use of its names): ``VulkanPartitioner``
(``partitioner.vulkan_partitioner``), ``VulkanBackend`` (the ``BackendDetails`` in
``vulkan_preprocess``), ``VulkanQuantizer`` (``quantizer.vulkan_quantizer``). Runtime half
(NumPy): a ``VkGraph`` interpreter registered under ``"VulkanBackend"`` by
``edgetorch.backends.builtin``. Importing this package imports no torch.
"""

from edgetorch.util.lazy_names import lazy_names

from . import runtime
from .runtime import BACKEND_ID

_COMPILER = {
    "VulkanPartitioner": ".partitioner.vulkan_partitioner",
    "VulkanQuantizer": ".quantizer.vulkan_quantizer",
}

__all__ = ["BACKEND_ID", "runtime", *_COMPILER]
__getattr__, __dir__ = lazy_names(__name__, _COMPILER)
