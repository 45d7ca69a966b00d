"""Shared test setup: make the helper modules (tests/compat, tests/support) importable, and
install the hooks that keep compatibility checks from being skipped silently (ci_guard.py).

The kernels are the reference the load passes (``runtime/optimize``) are compared against, so
the suite loads methods with the passes off unless a test asks for them
(``load_method(name, optimize=True)``; the equivalence tests run every example program both
ways), and a pass that fails raises instead of being skipped with a warning."""

import os
import sys
from pathlib import Path

# The compiled kernels warm up in the background and the first calls take the NumPy paths
# (edgetorch.kernels.accel); tests wait for them, to see the compiled paths from the first call
# (test_accel_warm_up.py checks the background mode).
os.environ.setdefault("EDGETORCH_ACCEL_WARMUP", "wait")
os.environ.setdefault("EDGETORCH_OPTIMIZE", "off")
os.environ.setdefault("EDGETORCH_OPTIMIZE_STRICT", "1")
# String hashing fixed for the processes started from here (xdist's workers, the reference
# ExecuTorch's exports): ExecuTorch's delegation iterates sets of node names (its
# duplicate-constant pass), so a program's node order, hence the .pte's bytes, follows the
# hash seed; both sides must share it for the byte-for-byte comparisons (the Makefile sets it
# for the pytest process itself too).
os.environ.setdefault("PYTHONHASHSEED", "0")

for _dir in ("compat", "support"):
    _path = str(Path(__file__).parent / _dir)
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ci_guard import (  # noqa: E402, F401  (pytest finds hooks by name in this module)
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
)
