"""``L1Comparator``: the sum of absolute differences."""

from __future__ import annotations

from typing import Any

import torch

from .._inspector_utils import convert_to_float_tensor
from .numerical_comparator_base import NumericalComparatorBase


class L1Comparator(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        return float(torch.abs(_diff(a, b)).sum())


def _diff(a: Any, b: Any) -> torch.Tensor:
    """AOT minus runtime, element by element.

    Outputs of one size but another shape (an ATen ``linear`` on [8, 1, 48] against the
    ``addmm`` that computed it as [8, 48]) are compared in their common row-major order;
    ExecuTorch broadcasts them instead ([8, 8, 48]) and reports a gap that is not there.
    """
    ta, tb = convert_to_float_tensor(a), convert_to_float_tensor(b)
    if ta.shape != tb.shape:
        if ta.numel() != tb.numel():
            raise ValueError(f"cannot compare an AOT output of shape {tuple(ta.shape)} with a "
                             f"runtime output of shape {tuple(tb.shape)}")
        tb = tb.reshape(ta.shape)
    return ta - tb
