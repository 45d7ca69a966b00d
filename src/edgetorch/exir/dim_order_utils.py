"""Between ``torch.memory_format`` and dim orders (ExecuTorch's ``exir.dim_order_utils``).

A dim order lists a tensor's dimensions from outermost to innermost in memory: contiguous is
``[0, 1, ..., n-1]``, channels-last (4-D only) is ``[0, 2, 3, 1]``; ``None`` means "keep the
input's", i.e. ``torch.preserve_format``.
"""

from __future__ import annotations

import torch

CHANNELS_LAST_DIM_ORDER = [0, 2, 3, 1]


def get_memory_format(dim_order: list[int] | None) -> torch.memory_format:
    """The memory format a dim order stands for."""
    if dim_order is None:
        return torch.preserve_format
    if list(dim_order) == list(range(len(dim_order))):
        return torch.contiguous_format
    if list(dim_order) == CHANNELS_LAST_DIM_ORDER:
        return torch.channels_last
    raise ValueError(f"dim_order {list(dim_order)} is neither contiguous nor channels-last "
                     "(4-D [0, 2, 3, 1]); no torch.memory_format stands for it")


def get_dim_order(memory_format: torch.memory_format | None, ndim: int) -> list[int] | None:
    """The dim order of ``memory_format`` for a rank-``ndim`` tensor."""
    if memory_format in (None, torch.preserve_format):
        return None
    if memory_format == torch.contiguous_format:
        if ndim < 0:
            raise ValueError(f"rank {ndim} is negative")
        return list(range(ndim))
    if memory_format == torch.channels_last:
        if ndim != 4:
            raise ValueError(f"channels_last needs a 4-D tensor, got rank {ndim}")
        return list(CHANNELS_LAST_DIM_ORDER)
    raise ValueError(f"no dim order for memory format {memory_format}")


def is_channel_last_dim_order(tensor: torch.Tensor) -> bool:
    return tensor.dim() == 4 and tensor.dim_order() == tuple(CHANNELS_LAST_DIM_ORDER)


def is_contiguous_dim_order(tensor: torch.Tensor) -> bool:
    return tensor.dim_order() == tuple(range(tensor.dim()))
