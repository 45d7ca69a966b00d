"""Single-operator TOSA graphs written directly with tosa-tools' serializer (random shapes,
kernels, padding, strides, dilation, zero points, biases, per-channel scales; int8 and int16),
compiled by Vela for the U55/U65 MAC configs in turn, simulated from the command stream and
compared bit for bit with tosa-tools' reference model on random full-range inputs."""

from __future__ import annotations

import numpy as np
import pytest
from npu_util import U55_U65, compare_with_reference, vela_blob
from tosa_graphs import KINDS

from edgetorch.errors import ExportError

SEEDS = 6  # one graph per MAC config


def random_graph_diffs(kind: str, seed: int, target: str) -> list[int] | None:
    """Max |simulator - reference| per trial for one random ``kind`` graph on ``target``, or
    None when Vela refuses the graph (it does for a few random shapes, e.g. pool limits)."""
    tosa = KINDS[kind](np.random.default_rng(1000 * seed + len(kind)))
    try:
        vela = vela_blob(tosa, target)
    except ExportError as exc:
        assert "Vela failed" in str(exc)
        return None
    diffs, prog = compare_with_reference(tosa, vela, trials=2, seed=seed, target=target)
    assert prog.accelerator == target
    assert diffs == [0, 0], f"{kind} seed {seed} on {target}: {diffs} ({prog.last_stats})"
    return diffs


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_single_op_graph(kind):
    compiled = sum(random_graph_diffs(kind, seed, U55_U65[seed % len(U55_U65)]) is not None
                   for seed in range(SEEDS))
    assert compiled >= SEEDS - 2, f"Vela compiled only {compiled} of {SEEDS} {kind} graphs"
