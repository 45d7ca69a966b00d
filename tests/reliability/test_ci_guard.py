"""The suite cannot pass by skipping: under CI a compatibility skip fails the run (ci_guard.py).

Each test runs an inner pytest on a small suite whose conftest installs the same hooks as
tests/conftest.py, with the reference python pointed at a path that does not exist.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

COMPAT_DIR = Path(__file__).resolve().parents[1] / "compat"
SUPPORT_DIR = COMPAT_DIR.with_name("support")

CONFTEST = f"""
import sys
sys.path[:0] = [{str(COMPAT_DIR)!r}, {str(SUPPORT_DIR)!r}]
from ci_guard import (pytest_make_collect_report, pytest_runtest_makereport,
                      pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown)
"""

SUITE = """
import pytest

@pytest.mark.compat
def test_compat_runs():
    assert 1 + 1 == 2

@pytest.mark.compat
@pytest.mark.skipif(True, reason="reference ExecuTorch env not available")
def test_compat_skipped():
    pass

@pytest.fixture
def ref_python():
    pytest.skip("reference ExecuTorch python not found (set EDGETORCH_REF_PYTHON)")

def test_unmarked_needs_reference(ref_python):
    pass

@pytest.mark.skip(reason="needs a GPU")
def test_ordinary_skip():
    pass

@pytest.mark.compat
@pytest.mark.xfail(strict=True, reason="a known gap")
def test_compat_known_gap():
    assert False
"""


def _run(tmp_path: Path, ci: bool, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    compat: x\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["EDGETORCH_REF_PYTHON"] = str(tmp_path / "no-such-python")
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
                           *extra, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_outside_ci_skips_pass_but_are_reported_loudly(tmp_path):
    result = _run(tmp_path, ci=False)
    assert result.returncode == 0, result.stdout
    out = result.stdout
    assert "compatibility cases that ran: 2 (1 passed, 1 xfailed)" in out
    assert "2 compatibility cases SKIPPED -- NOT checked against ExecuTorch" in out
    assert "test_compat_skipped" in out and "test_unmarked_needs_reference" in out
    assert "3 skipped" in out  # the ordinary skip stays a skip too


def test_under_ci_a_missing_reference_env_fails(tmp_path):
    result = _run(tmp_path, ci=True)
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "2 compatibility cases FAILED (CI)" in out
    assert "no-such-python does not exist" in out  # says why the environment is unusable
    assert "ERROR test_inner.py::test_compat_skipped" in out
    assert "ERROR test_inner.py::test_unmarked_needs_reference" in out
    assert "SKIPPED [1] test_inner.py" in out and "needs a GPU" in out
    assert "compatibility cases that ran: 2 (1 passed, 1 xfailed)" in out


def test_under_ci_a_missing_reference_env_fails_on_xdist_workers_too(tmp_path):
    """``make test`` runs the suite on two pytest-xdist workers: the skips still fail, and
    the controller's summary counts what both workers ran."""
    pytest.importorskip("xdist")
    result = _run(tmp_path, True, "-n", "2")
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "2 compatibility cases FAILED (CI)" in out
    assert "compatibility cases that ran: 2 (1 passed, 1 xfailed)" in out


def test_under_ci_a_compat_module_skipped_at_import_fails(tmp_path):
    """A compatibility module that skips itself whole (e.g. importorskip) fails under CI."""
    compat = tmp_path / "compat"
    compat.mkdir()
    (compat / "test_gone.py").write_text("import pytest\npytest.importorskip('no_such_mod')\n")
    result = _run(tmp_path, ci=True)
    assert result.returncode == 2, result.stdout  # pytest: interrupted by a collection error
    assert "ERROR compat/test_gone.py" in result.stdout
    assert "compatibility module test_gone.py was skipped under CI" in result.stdout
    outside = _run(tmp_path, ci=False)
    assert outside.returncode == 0, outside.stdout
    assert "test_gone.py (whole module)" in outside.stdout
