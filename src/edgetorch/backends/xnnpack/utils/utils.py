"""Helpers of ExecuTorch's ``backends.xnnpack.utils.utils`` that backend tests use (defined
once in ``backends.transforms.utils``)."""

from ...transforms.utils import get_param_tensor, is_param_node

__all__ = ["get_param_tensor", "is_param_node"]
