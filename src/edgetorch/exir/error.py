"""ExecuTorch's ``exir.error`` names: ``ExportError(ExportErrorType.X, message)`` for user
errors, ``InternalError`` and ``internal_assert`` for broken invariants. The classes are
edgetorch's own (``edgetorch.errors``)."""

from __future__ import annotations

from ..errors import ExportError, ExportErrorType, InternalError


def internal_assert(pred: bool, assert_msg: str) -> None:
    """``assert`` that raises ``InternalError`` (kept under ``python -O`` too)."""
    if not pred:
        raise InternalError(assert_msg)


__all__ = ["ExportError", "ExportErrorType", "InternalError", "internal_assert"]
