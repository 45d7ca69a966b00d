"""The seed tutorial's sections 5 and 6 run unchanged (imports renamed) and their check holds."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).with_name("seed_tutorial.py")


def test_seed_tutorial_runs_and_outputs_match(tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "✓ ExecuTorch imported successfully!" in out
    assert "✓ Outputs match: True" in out, out[-2000:]
    assert "✓ Model ready for edge deployment!" in out
    assert (tmp_path / "tiny_classifier.pte").stat().st_size > 0
    assert (tmp_path / "model.pte").stat().st_size > 0
