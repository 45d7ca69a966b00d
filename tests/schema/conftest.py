"""Shared fixtures for the format-layer tests: checked-in ExecuTorch files, a hand-built
program that uses every schema feature, and the reference ExecuTorch interpreter (optional)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from schema_helpers import make_rich_program

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def et_pte() -> bytes:
    """The TinyClassifier .pte written by ExecuTorch 1.5.1 (see tests/fixtures/README.md)."""
    return (FIXTURES / "et_tiny_classifier.pte").read_bytes()


@pytest.fixture(scope="session")
def et_ptd() -> bytes:
    """A .ptd written by ExecuTorch 1.5.1's FlatTensorSerializer (see tests/fixtures/README.md)."""
    return (FIXTURES / "et_named_tensors.ptd").read_bytes()


@pytest.fixture(scope="session")
def ref_python() -> str:
    """Path of the reference venv's python (with executorch==1.5.1); skips when absent."""
    path = os.environ.get("EDGETORCH_REF_PYTHON", str(REPO / ".venv-ref" / "bin" / "python"))
    if not Path(path).is_file():
        pytest.skip(f"reference ExecuTorch python not found at {path} (set EDGETORCH_REF_PYTHON)")
    return path


@pytest.fixture
def rich():
    return make_rich_program()
