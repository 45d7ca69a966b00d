"""Recipe sweeps on Ethos-U targets: a candidate is quantized with the Ethos-U quantizer,
lowered through TOSA and Vela, run in edgetorch's runtime (the NPU command stream simulated)
and scored, with Vela's cycle estimate."""

from __future__ import annotations

import math

import torch

from edgetorch.devtools.quant_debug.data import load_samples
from edgetorch.devtools.quant_debug.recipe_sweep import SweepTask, evaluate_candidate
from edgetorch.devtools.quant_debug.recipes import Recipe


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(8, 10)).eval()


def test_ethos_u_candidates_run_and_carry_vela_cycles(tmp_path):
    model, example = _model(), (torch.zeros(1, 1, 8, 8),)
    gen = torch.Generator().manual_seed(1)
    samples = load_samples([torch.randn(1, 1, 8, 8, generator=gen) for _ in range(4)], example)
    rows = {}
    for target in ("ethos-u55-128", "ethos-u85-256"):
        task = SweepTask(Recipe("static", target), model, example, [samples], samples, "cosine",
                         "test", latency_repeat=1, intermediates=str(tmp_path))
        rows[target] = row = evaluate_candidate(task)
        assert row["status"] == "ok", row.get("traceback")
        # int8 through the NPU against the float model: one 8-bit rounding per layer
        assert row["metric"] > 0.99 and row["float_metric"] == 1.0
        assert row["vela_cycles"] > 0 and row["pte_bytes"] > 0
        assert math.isnan(row["latency_ratio"])  # a simulated NPU has no latency to compare
    # twice the MACs per cycle: fewer cycles for the same network
    assert rows["ethos-u85-256"]["vela_cycles"] < rows["ethos-u55-128"]["vela_cycles"]
