"""The runtime half of the Vulkan backend: ``interpreter.VulkanBackend``, a NumPy interpreter
of ExecuTorch's ``VkGraph`` registered under ``"VulkanBackend"`` (torch-free)."""

from ....runtime.backends import register_backend
from .interpreter import BACKEND_ID, VulkanBackend, VulkanDelegate

register_backend(BACKEND_ID, VulkanBackend())

__all__ = ["BACKEND_ID", "VulkanBackend", "VulkanDelegate"]
