"""ExecuTorch's ``exir.scalar_type``: ``ScalarType`` of ``scalar_type.fbs`` (defined once in
``edgetorch.schema.scalar_type``)."""

from ..schema.scalar_type import ScalarType

__all__ = ["ScalarType"]
