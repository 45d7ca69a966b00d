"""Shared test setup: make the helper modules (tests/compat, tests/support) importable."""

import sys
from pathlib import Path

for _dir in ("compat", "support"):
    _path = str(Path(__file__).parent / _dir)
    if _path not in sys.path:
        sys.path.insert(0, _path)

