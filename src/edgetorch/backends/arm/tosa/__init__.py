"""The TOSA half of the Arm backend: specifications, compile spec, partitioner, lowering."""

from .specification import TosaSpecification

__all__ = ["TosaSpecification"]
