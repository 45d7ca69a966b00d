"""vela_estimates: Vela's summary per delegate, equal to the CSV Vela writes."""

from __future__ import annotations

import csv

import pytest

from edgetorch.backends.arm.ethosu import vela_estimates
from edgetorch.backends.arm.ethosu.estimates import format_estimates

pytestmark = pytest.mark.compat


def _csv_row(folder):
    (path,) = (folder / "inter" / "output").glob("out_summary_*.csv")
    with open(path, newline="") as f:
        return next(csv.DictReader(f))


@pytest.mark.parametrize("model,target", [("add", "ethos-u55-128"), ("convnet", "ethos-u85-256")])
def test_estimates_equal_vela_csv(ref_arm, model, target):
    out = ref_arm(model, target)
    (est,) = vela_estimates(out / "model.pte", per_layer=True)
    row = _csv_row(out)
    for key, text in row.items():
        value = est[key]
        assert (value == float(text)) if isinstance(value, (int, float)) else value == text, key
    assert est["target"] == target and est["tag"] == "tag0" and est["delegate"] == 0
    assert est["npu_operators"] >= 1 and est["cpu_operators"] == 0
    assert est["per_layer"] and all(r["Target"] == "NPU" for r in est["per_layer"])
    assert sum(r["Op Cycles"] for r in est["per_layer"]) <= est["cycles_total"]
    text = format_estimates([est])
    assert f"{est['cycles_total']:,.0f} cycles" in text


def test_add_u55_figures(ref_arm):
    (est,) = vela_estimates(ref_arm("add", "ethos-u55-128") / "model.pte")
    assert est["cycles_total"] == 288 and est["core_clock"] == 500e6
    assert est["system_config"] == "Ethos_U55_High_End_Embedded"
