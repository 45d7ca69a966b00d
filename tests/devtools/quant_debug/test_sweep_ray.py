"""The standard recipe grid (13 candidates) on the digits CNN, in two local worker processes
and as Ray tasks on a 2-CPU local Ray instance this test starts: the same rows (everything but
the timings) and the same Pareto front. Slow (two full sweeps): ``make test-quant-slow``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from edgetorch.devtools.quant_debug import default_grid, sweep
from edgetorch.devtools.quant_debug.recipe_sweep import DETERMINISTIC

sys.path.insert(0, str(Path(__file__).parent))
import digits  # noqa: E402

pytestmark = pytest.mark.slow
pytest.importorskip("ray", reason="Ray is the optional extra edgetorch[ray]")

SAMPLES = 64


def test_ray_and_local_processes_give_the_same_sweep(local_ray, tmp_path):
    grid = default_grid(arm=False)
    assert len(grid) >= 12
    args = (digits.trained_cnn(), digits.example_inputs(), digits.test_loader(SAMPLES), grid)
    local = sweep(*args, out_dir=tmp_path / "local", workers=2, latency_repeat=1,
                  show_progress=False)
    remote = sweep(*args, out_dir=tmp_path / "ray", ray="auto", latency_repeat=1,
                   show_progress=False)
    assert (local.table.status == "ok").all(), local.table.error.to_dict()
    columns = [c for c in DETERMINISTIC if c in local.table.columns]
    a = local.table[columns].set_index("key").sort_index()
    b = remote.table[columns].set_index("key").sort_index()
    assert a.fillna(-1).equals(b.fillna(-1))
    assert list(local.front.key) == list(remote.front.key)
