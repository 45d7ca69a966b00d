"""Import tosa-tools' modules with an error that says which extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from ....errors import BackendNotFoundError

INSTALL_HINT = ("install the Arm extra: pip install 'edgetorch[arm]' (tosa-tools==2026.5.0, "
                "which needs numpy<2.2), or run from a venv that has it (make test-arm)")


def require_tosa_tools(module: str) -> ModuleType:
    """``tosa_reference_model``, ``tosa_serializer`` or ``tosa``; raises
    ``BackendNotFoundError`` naming the extra when tosa-tools is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendNotFoundError(f"the Arm TOSA backend needs tosa-tools' {module!r} module, "
                                   f"which cannot be imported ({exc}); {INSTALL_HINT}") from exc
