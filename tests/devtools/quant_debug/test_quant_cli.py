"""``edgetorch quant debug|sweep`` on the digits CNN, its data as a folder of .npy batches and
a labels file (what a user without a DataLoader has)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from edgetorch.cli import main

sys.path.insert(0, str(Path(__file__).parent))
import digits  # noqa: E402

SPEC = f"{Path(digits.__file__)}:planted_cnn"
BATCHES = 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    _, _, x, y = digits.digits()
    n = BATCHES * digits.BATCH
    for i in range(BATCHES):  # one example batch per file
        np.save(folder / f"{i:03d}.npy", x[i * digits.BATCH:(i + 1) * digits.BATCH])
    np.save(folder.parent / f"{folder.name}-labels.npy", y[:n])
    return folder, folder.parent / f"{folder.name}-labels.npy"


@pytest.mark.slow  # a second full debugging run (test_debugger.py has the API's)
def test_quant_debug_writes_the_report_and_names_the_planted_layer(data, tmp_path, capsys):
    folder, labels = data
    out = tmp_path / "r.html"
    assert main(["quant", "debug", SPEC, "--data", str(folder), "--labels", str(labels),
                 "-o", str(out), "--csv", str(tmp_path / "t.csv"),
                 "--plot", str(tmp_path / "p.svg")]) == 0
    text = capsys.readouterr().out
    assert "quantization debug: xnnpack/static/pc, 4 samples" in text
    assert "the error enters at stage 'fake_quant', layer 'conv2d_1' (conv2)" in text
    worst = text.split("worst layers at fake_quant:")[1].splitlines()[1].split()
    assert worst[:2] == ["conv2d_1", "conv2"]
    assert "Error enters at stage <b>fake_quant</b>" in out.read_text()
    table = pd.read_csv(tmp_path / "t.csv")
    assert set(table.stage) == {"float", "fake_quant", "edge", "portable", "xnnpack"}
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")


def test_quant_sweep_in_this_process_and_bad_recipes(data, tmp_path, capsys):
    folder, labels = data
    out = tmp_path / "sweep"
    assert main(["quant", "sweep", SPEC, "--data", str(folder), "--labels", str(labels),
                 "--recipes", "portable:fp32", "--workers", "0", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "portable/fp32" in text and "Pareto front: portable/fp32" in text
    row = pd.read_csv(out / "results.csv").iloc[0]
    want = digits.accuracy_on(digits.planted_cnn(), BATCHES * digits.BATCH)
    assert row.status == "ok" and row.metric == want
    assert main(["quant", "sweep", SPEC, "--data", str(folder), "--recipes", "gpu:static",
                 "-o", str(tmp_path / "bad")]) == 2
    assert "unknown backend 'gpu'" in capsys.readouterr().err


def test_quant_sweep_takes_a_qat_fine_tune_from_a_file(data, tmp_path, capsys):
    """``--qat-train FILE.py:FUNCTION``: the spec travels to the worker, which imports it."""
    folder, labels = data
    out = tmp_path / "qat"
    fine_tune = f"{Path(digits.__file__)}:qat_fine_tune"
    assert main(["quant", "sweep", SPEC, "--data", str(folder), "--labels", str(labels),
                 "--recipes", "xnnpack:qat", "--qat-train", fine_tune, "--workers", "0",
                 "-o", str(out)]) == 0
    row = pd.read_csv(out / "results.csv").iloc[0]
    assert (row.key, row.status) == ("xnnpack/qat/pc", "ok")
    assert main(["quant", "sweep", SPEC, "--data", str(folder), "--recipes", "xnnpack:qat",
                 "--qat-train", f"{Path(digits.__file__)}:no_such_function",
                 "-o", str(tmp_path / "bad")]) == 2
    assert "defines no function 'no_such_function'" in capsys.readouterr().err
