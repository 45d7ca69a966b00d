"""A short run of scripts/soak.py's checks (the full soak is not in the default suite): loading
and dropping a program leaves no file descriptor or memory mapping behind, and repeated
``execute`` calls keep giving the first call's result. Torch-free (an ExecuTorch-written file)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import soak  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")


@pytest.fixture
def pte(tmp_path):
    return Path(shutil.copy(REPO / "tests/fixtures/et_tiny_classifier.pte", tmp_path / "t.pte"))


def test_load_and_drop_leaks_no_fd_or_mapping(pte):
    result = soak.soak_load(pte, 30)
    assert result["ok"], result
    assert result["pte_file_maps"] == [0, 0]


def test_the_file_mapping_is_counted_while_a_program_lives(pte):
    from edgetorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    assert soak.maps(pte) == 1  # the check above would see a leaked mapping
    del program


def test_repeated_execute_gives_the_same_result(pte):
    result = soak.soak_execute(pte, 200, tolerance=1.0, label="quick")
    assert result["last_output_equals_first"], result
