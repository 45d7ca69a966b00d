"""Numerical comparators for ``Inspector.calculate_numeric_gap``
(``executorch.devtools.inspector.numerical_comparator``)."""

from .l1_numerical_comparator import L1Comparator
from .mse_numerical_comparator import MSEComparator
from .numerical_comparator_base import (
    DebugHandle,
    IntermediateOutputMapping,
    NumericalComparatorBase,
)
from .snr_numerical_comparator import SNRComparator

__all__ = ["DebugHandle", "IntermediateOutputMapping", "L1Comparator", "MSEComparator",
           "NumericalComparatorBase", "SNRComparator"]
