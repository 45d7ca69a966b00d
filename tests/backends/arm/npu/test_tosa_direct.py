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


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_single_op_graph(kind):
    compiled = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng(1000 * seed + len(kind))
        tosa = KINDS[kind](rng)
        target = U55_U65[seed % len(U55_U65)]
        try:
            vela = vela_blob(tosa, target)
        except ExportError as exc:  # Vela refuses a few random shapes (e.g. pool limits)
            assert "Vela failed" in str(exc)
            continue
        compiled += 1
        diffs, prog = compare_with_reference(tosa, vela, trials=2, seed=seed, target=target)
        assert prog.accelerator == target
        assert diffs == [0, 0], f"{kind} seed {seed} on {target}: {diffs} ({prog.last_stats})"
    assert compiled >= SEEDS - 2, f"Vela compiled only {compiled} of {SEEDS} {kind} graphs"
