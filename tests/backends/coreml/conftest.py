"""Fixtures of the Core ML backend tests: ExecuTorch's own Core ML exports (made once per
session by the reference venv, which has coremltools 9.0, two at a time)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from delegate_checks import RefExports  # tests/support
from refenv import ref_available  # tests/compat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def coreml_ref(tmp_path_factory):
    """``get(model, specs, quantize)``: ExecuTorch's ``.pte`` (``cm_ref.py``)."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    exports = RefExports(tmp_path_factory.mktemp("coreml-ref"), HERE / "cm_ref.py",
                         ("--specs", "--quantize"))
    yield exports
    exports.pool.shutdown(wait=True)
