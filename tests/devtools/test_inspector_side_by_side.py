"""Side by side with ExecuTorch 1.5.1's Inspector on the same files (ours and ExecuTorch's),
for a small CNN, a CNN with BatchNorm and a transformer layer, portable and XNNPACK: the same
events (OPERATOR_CALL rows carry their instruction's values), the same printed rows, the same
ETDump value types, and the same numeric-gap rows naming the model's own layers.

Gaps: the runtime computes what eager PyTorch computes, so every MSE is float32 rounding
(|x| ~ 1, reductions of at most 48 terms: (48 * 2**-24)**2 ~ 1e-11 at worst). ExecuTorch
broadcasts outputs of one size and another shape ([8, 1, 48] against [8, 48]) and reports a
gap there that ours, comparing them in row-major order, does not; elsewhere both agree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import ref_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))

pytestmark = pytest.mark.compat

FLOW = Path(__file__).with_name("devtools_flow.py")
SRC = Path(__file__).resolve().parents[2] / "src"
ROUNDING_MSE = 1e-10


def _theirs(*args: str) -> None:
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    ref_process.run([str(ref_python()), str(FLOW), "executorch", *args], env=_clean_env(),
                    check=True, capture_output=True, timeout=1200)


def _ours(*args: str) -> None:
    import os

    env = dict(os.environ, PYTHONPATH=str(SRC))
    subprocess.run([sys.executable, str(FLOW), "edgetorch", *args], env=env, check=True,
                   capture_output=True, timeout=1200)


# The default run takes each model once, alternating whose file it is; `-m slow` the other five.
DEFAULT = {("cnn", "executorch"), ("cnn-xnnpack", "edgetorch"), ("bn", "edgetorch"),
           ("tfm", "executorch"), ("tfm-xnnpack", "edgetorch")}


@pytest.mark.parametrize(("model", "origin"), [
    pytest.param(m, o, id=f"{m}-{o}", marks=[] if (m, o) in DEFAULT else [pytest.mark.slow])
    for m in ["cnn", "cnn-xnnpack", "bn", "tfm", "tfm-xnnpack"]
    for o in ["executorch", "edgetorch"]])
def test_inspectors_agree_on_the_same_files(tmp_path, model, origin):
    (_theirs if origin == "executorch" else _ours)("generate", model, str(tmp_path))
    _theirs("inspect", str(tmp_path), str(tmp_path / "theirs.json"))
    _ours("inspect", str(tmp_path), str(tmp_path / "ours.json"))
    theirs = json.loads((tmp_path / "theirs.json").read_text())
    ours = json.loads((tmp_path / "ours.json").read_text())

    assert ours["events"] == theirs["events"]
    assert ours["printed"] == theirs["printed"] and len(ours["printed"]) > 3
    assert ours["columns"] == theirs["columns"]
    assert ours["value_types"] == theirs["value_types"] == ["Tensor"]
    assert [g[:3] for g in ours["gap"]] == [g[:3] for g in theirs["gap"]]
    assert ours["gap"] and max(v for g in ours["gap"] for v in g[3]) <= ROUNDING_MSE
    for o, t in zip(ours["gap"], theirs["gap"]):
        if max(t[3]) <= ROUNDING_MSE:  # where ExecuTorch compares like shapes
            assert o[3] == pytest.approx(t[3], abs=ROUNDING_MSE)
    if model.startswith("cnn"):  # the model's own layers, as ExecuTorch names them
        assert [g[1] for g in ours["gap"]][-1][-1] == "linear"
        assert "conv2d" in ours["gap"][0][1]
