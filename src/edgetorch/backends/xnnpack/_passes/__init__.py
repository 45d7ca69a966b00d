"""Graph passes for XNNPACK lowering (ExecuTorch's ``backends/xnnpack/_passes``)."""

from .remove_noop_expand_copy_pass import RemoveNoopExpandCopyPass

__all__ = ["RemoveNoopExpandCopyPass"]
