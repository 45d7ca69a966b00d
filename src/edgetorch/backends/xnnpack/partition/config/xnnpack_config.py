"""``ConfigPrecisionType`` at ExecuTorch's path (defined with the partitioner)."""

from ..xnnpack_partitioner import ConfigPrecisionType

__all__ = ["ConfigPrecisionType"]
