"""Graph-level markers that ``to_executorch`` inserts and the emitter understands.

They mirror ExecuTorch's ``exir.memory``: ``alloc`` is a planned output buffer for an
out-variant call, ``view`` a zero-copy reshape (emitted as ``executorch_prim::et_view``).
Neither runs in eager mode; they exist so the lowered graph can be printed and inspected.
"""

from __future__ import annotations

import torch


def alloc(spec: tuple[tuple[int, ...], torch.dtype]) -> torch.Tensor:
    """A planned buffer of the given (shape, dtype)."""
    shape, dtype = spec
    return torch.empty(shape, dtype=dtype)


def view(base: torch.Tensor, size: list[int]) -> torch.Tensor:
    """``base`` seen with another shape, sharing its memory."""
    return base.view(size)
