"""Helpers the Arm passes share (ExecuTorch's ``arm_pass_utils`` names)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ....errors import InvalidArgumentError


def get_first_fake_tensor(node: torch.fx.Node) -> FakeTensor:
    """The FakeTensor in ``node.meta["val"]``; the first one when the node has several outputs."""
    val = node.meta.get("val")
    if isinstance(val, Sequence) and not isinstance(val, torch.Tensor):
        val = val[0] if len(val) else None
    if not isinstance(val, FakeTensor):
        raise InvalidArgumentError(f"node {node.name} ({node.target}) has no FakeTensor in "
                                   f"meta['val'] (found {type(val).__name__})")
    return val
