"""``SNRComparator``: signal-to-noise ratio in dB, ``10 log10(mean(a^2) / mean((a-b)^2))``
(``inf`` when the outputs are equal)."""

from __future__ import annotations

from typing import Any

import torch

from .._inspector_utils import convert_to_float_tensor
from .l1_numerical_comparator import _diff
from .numerical_comparator_base import NumericalComparatorBase


class SNRComparator(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        signal = torch.mean(torch.pow(convert_to_float_tensor(a), 2))
        noise = torch.mean(torch.pow(_diff(a, b), 2))
        return float(10 * torch.log10(signal / noise))
