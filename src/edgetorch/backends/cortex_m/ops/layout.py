"""Channels-last facts the Cortex-M lowering decides on (shared by ops, passes, quantizer)."""

from __future__ import annotations

import torch

_NHWC = [0, 2, 3, 1]
_NHWC_INV = [0, 3, 1, 2]


def is_channels_last(t: torch.Tensor) -> bool:
    """A 4-D tensor stored NHWC (single channel or 1x1 maps count: both layouts agree)."""
    if t.ndim != 4:
        return False
    if t.shape[1] == 1 or t.shape[2] == t.shape[3] == 1:
        return True
    return list(t.dim_order())[:2] == [0, 2]


def to_physical(logical: list[int], t: torch.Tensor) -> list[int]:
    """A 4-entry NCHW-ordered list in NHWC memory order when ``t`` is channels-last."""
    return [logical[_NHWC[i]] for i in range(4)] if is_channels_last(t) else list(logical)


def pad_to_logical(physical: list[int], t: torch.Tensor) -> list[int]:
    return [physical[_NHWC_INV[i]] for i in range(4)] if is_channels_last(t) else list(physical)


def is_channel_broadcast(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` and ``b`` (both channels-last, same rank) differ only by a per-channel operand."""
    if a.dim() != b.dim() or not (is_channels_last(a) and is_channels_last(b)):
        return False
    return a.size(1) == b.size(1) and (a.numel() == a.size(1) or b.numel() == b.size(1))
