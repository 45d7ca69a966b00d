"""The runtime half of the Vulkan backend (see ``interpreter``)."""

BACKEND_ID = "VulkanBackend"
