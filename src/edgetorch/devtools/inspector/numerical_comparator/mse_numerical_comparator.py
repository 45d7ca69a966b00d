"""``MSEComparator``: the mean squared difference."""

from __future__ import annotations

from typing import Any

import torch

from .l1_numerical_comparator import _diff
from .numerical_comparator_base import NumericalComparatorBase


class MSEComparator(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        return float(torch.mean(torch.square(_diff(a, b))))
