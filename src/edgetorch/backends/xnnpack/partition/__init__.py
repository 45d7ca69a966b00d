"""The XNNPACK partitioner (ExecuTorch's ``backends.xnnpack.partition``)."""

from .xnnpack_partitioner import ConfigPrecisionType, XnnpackPartitioner

__all__ = ["ConfigPrecisionType", "XnnpackPartitioner"]
