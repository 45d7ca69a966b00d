"""Recipe sweeps on the digits CNN in local worker processes: each candidate's score is the
program's own in edgetorch's runtime, the table is saved and resumed, the Pareto front is the
set of candidates nothing beats on every objective."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from edgetorch.devtools.quant_debug import pareto, sweep
from edgetorch.errors import QuantDebugError

sys.path.insert(0, str(Path(__file__).parent))
import digits  # noqa: E402

SAMPLES = 64
RECIPES = ["portable:fp32", "xnnpack:static", "xnnpack:dynamic"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    result = sweep(digits.trained_cnn(), digits.example_inputs(), digits.test_loader(SAMPLES),
                   RECIPES, out_dir=out, workers=2, latency_repeat=2, show_progress=False)
    return result, out


def test_every_candidate_is_scored_in_its_worker(swept):
    result, out = swept
    table = result.table.set_index("key")
    assert list(table.index) == ["portable/fp32", "xnnpack/static/pc", "xnnpack/dynamic/pc"]
    assert (table.status == "ok").all(), table.error.to_dict()
    float_top1 = digits.accuracy_on(digits.trained_cnn(), SAMPLES)
    assert (table.float_metric == float_top1).all()
    # the float program in the runtime classifies exactly as torch does
    assert table.loc["portable/fp32", "metric"] == float_top1
    # int8 weights save 3 of every 4 bytes; per-channel scales and the XNNPACK graph take back
    # less than one
    weights = sum(p.numel() for p in digits.trained_cnn().parameters() if p.dim() > 1)
    saved = table.loc["portable/fp32", "pte_bytes"] - table.loc["xnnpack/static/pc", "pte_bytes"]
    assert saved > 2 * weights
    assert (table.planned_bytes > 0).all() and (table.latency_ratio > 0).all()
    assert (table.samples == SAMPLES // digits.BATCH).all()
    assert table.metric_drop.abs().max() <= 5.0


def test_pareto_front_is_the_undominated_set(swept):
    result, _ = swept
    ok = result.table[result.table.status == "ok"]
    values = np.stack([ok.metric, -ok.pte_bytes, -ok.planned_bytes], axis=1)
    undominated = {k for k, v in zip(ok.key, values)
                   if not any((w >= v).all() and (w > v).any() for w in values)}
    assert set(result.front.key) == undominated
    assert list(result.front.metric) == sorted(result.front.metric, reverse=True)
    # one objective: the front is the best candidates on it
    best = pareto(result.table, {"pte_bytes": "min"})
    assert list(best.key) == [ok.loc[ok.pte_bytes.idxmin(), "key"]]


def test_files_and_resume(swept, tmp_path):
    result, out = swept
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] != [] and len(lines) == len(RECIPES)
    for name in ("results.csv", "pareto.csv", "report.html", "sweep.json"):
        assert (out / name).stat().st_size > 0, name
    page = (out / "report.html").read_text()
    assert "<script" not in page and page.count("<svg") == 1
    # a rerun with one more recipe computes that one only, in this process
    again = sweep(digits.trained_cnn(), digits.example_inputs(), digits.test_loader(SAMPLES),
                  RECIPES + ["portable:static"], out_dir=out, workers=0, latency_repeat=1,
                  show_progress=False)
    assert len((out / "results.jsonl").read_text().splitlines()) == len(RECIPES) + 1
    first = result.table.set_index("key")
    assert (again.table.set_index("key").loc[first.index, "latency_ms"] == first.latency_ms).all()
    # a folder is tied to its model, data and metric
    with pytest.raises(QuantDebugError, match="another model, data or metric"):
        sweep(digits.planted_cnn(), digits.example_inputs(), digits.test_loader(SAMPLES),
              RECIPES, out_dir=out, workers=0, show_progress=False)
