"""Shared test setup: make the compat helpers (refenv, feature_models) importable everywhere."""

import sys
from pathlib import Path

_COMPAT = str(Path(__file__).parent / "compat")
if _COMPAT not in sys.path:
    sys.path.insert(0, _COMPAT)
