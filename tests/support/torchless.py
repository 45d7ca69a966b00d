"""Running code in a fresh interpreter where torch cannot be imported."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TORCH_BLOCKER = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'torch' or name.startswith('torch.'):\n"
    "            raise ImportError('torch is blocked')\n"
    "sys.meta_path.insert(0, _Block())\n"
)


def run_without_torch(code: str, timeout: float = 120):
    """Run ``code`` in a fresh interpreter where importing torch fails; returns the process."""
    return subprocess.run([sys.executable, "-c", TORCH_BLOCKER + code], capture_output=True,
                          text=True, timeout=timeout)


def torch_job_fixtures(subdir: str = "") -> Path:
    """``$EDGETORCH_FIXTURES/subdir``: the programs, inputs and eager outputs the torch job
    writes (``tests/exir/test_write_fixtures.py``, ``test_delegation.py``) for the torch-free
    job to check. Skips outside that job: without the variable, and where torch is installed
    (the torch job runs its files in parallel, so a reader there could run before the
    writer; its own tests compare with eager directly)."""
    root = os.environ.get("EDGETORCH_FIXTURES")
    if not root:
        pytest.skip("EDGETORCH_FIXTURES not set (the torch job writes them)")
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("checked by the torch-free job (make test-notorch)")
    return Path(root) / subdir
