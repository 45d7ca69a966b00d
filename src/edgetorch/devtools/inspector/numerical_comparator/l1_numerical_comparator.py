"""``L1Comparator``: the sum of absolute differences."""

from __future__ import annotations

from typing import Any

import torch

from .numerical_comparator_base import NumericalComparatorBase, convert_to_float_tensor


class L1Comparator(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        return float(torch.abs(_diff(a, b)).sum())


def _diff(a: Any, b: Any) -> torch.Tensor:
    ta, tb = convert_to_float_tensor(a), convert_to_float_tensor(b)
    if not _broadcastable(ta.shape, tb.shape):
        raise ValueError(f"cannot compare an AOT output of shape {tuple(ta.shape)} with a "
                         f"runtime output of shape {tuple(tb.shape)}")
    return ta - tb


def _broadcastable(a: torch.Size, b: torch.Size) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))
