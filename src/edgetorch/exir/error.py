"""ExecuTorch's ``exir.error`` names: ``ExportError(ExportErrorType.X, message)`` for user
errors, ``InternalError`` and ``internal_assert`` for broken invariants. The classes are
edgetorch's own (``edgetorch.errors``), but for one that needs torch's base class."""

from __future__ import annotations

from torch._export.verifier import SpecViolationError

from ..errors import ExportError, ExportErrorType, InternalError, UnsupportedOperatorError


class NonCoreOperatorError(UnsupportedOperatorError, SpecViolationError):
    """An ATen operator outside core ATen reached the Edge dialect, neither preserved nor
    excepted: what ExecuTorch's Edge verifier refuses with torch's ``SpecViolationError``, so
    it is one too (defined here, not in ``edgetorch.errors``, which stays torch-free)."""


def internal_assert(pred: bool, assert_msg: str) -> None:
    """``assert`` that raises ``InternalError`` (kept under ``python -O`` too)."""
    if not pred:
        raise InternalError(assert_msg)


__all__ = ["ExportError", "ExportErrorType", "InternalError", "NonCoreOperatorError",
           "internal_assert"]
