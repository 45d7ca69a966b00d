"""Values crossing the runtime boundary: torch tensors and NumPy arrays in and out.

The runtime never imports torch. If the caller passes torch tensors, torch is already in
``sys.modules``; we use it from there to convert outputs back (zero-copy ``from_numpy``).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def _torch() -> Any:
    return sys.modules.get("torch")


def is_torch_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def to_numpy(x: Any) -> Any:
    """A NumPy view of a torch tensor (zero-copy for CPU tensors); other values unchanged."""
    if not is_torch_tensor(x):
        return x
    torch = _torch()
    t = x.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        from ..schema.scalar_type import ScalarType, to_numpy_dtype

        return t.view(torch.int16).numpy().view(to_numpy_dtype(ScalarType.BFLOAT16))
    return t.numpy()


def to_torch(a: np.ndarray) -> Any:
    """Zero-copy torch tensor over ``a`` (torch taken from sys.modules)."""
    torch = _torch()
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if not a.flags.writeable:
        a = a.copy()
    return torch.from_numpy(a)
