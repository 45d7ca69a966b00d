from .coreml_partitioner import CoreMLPartitioner

__all__ = ["CoreMLPartitioner"]
