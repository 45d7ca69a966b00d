"""ExecuTorch's ``exir.tensor_layout``: ``TensorLayout`` (dtype, sizes, dim order of a stored
tensor; the ``.ptd`` schema's table, defined once in ``edgetorch.schema.ptd``) and the layout
of a torch tensor (``TensorLayout.from_tensor`` calls :func:`tensor_layout_of`)."""

from __future__ import annotations

import torch

from ..errors import NamedDataError
from ..schema.ptd import TensorLayout
from .tensor import dim_order_from_stride, scalar_type_of


def tensor_layout_of(tensor: torch.Tensor) -> TensorLayout:
    """The layout of a dense tensor stored as it lies in memory (contiguous or
    channels-last); any other striding is refused."""
    if not (tensor.is_contiguous() or tensor.is_contiguous(memory_format=torch.channels_last)):
        raise NamedDataError(f"a tensor of shape {tuple(tensor.shape)} and strides "
                             f"{tuple(tensor.stride())} is neither contiguous nor channels-last; "
                             "call .contiguous() before storing it")
    return TensorLayout(scalar_type_of(tensor.dtype), list(tensor.shape),
                        list(dim_order_from_stride(tensor.stride())))


__all__ = ["TensorLayout", "tensor_layout_of"]
