"""The Cortex-M tests import their helpers (models, the CMSIS-NN oracle) from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
