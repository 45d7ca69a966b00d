"""Per-layer debugging across stages on a CNN trained on scikit-learn's digits with one planted
bad layer (``digits.planted_cnn``: ``conv2`` has outlier weights that int8 cannot hold).

The debugger must find ``conv2`` first at the stage where the error enters (``fake_quant``),
its numbers must be torch's own, and the later stages (Edge in torch, the portable and XNNPACK
programs in edgetorch's runtime) must agree with the fake-quantized model within the steps
of each layer's output quantizer."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from headless_chromium import rendered_dom, screenshot  # tests/support

from edgetorch.devtools.quant_debug import debug_quantization
from edgetorch.devtools.quant_debug.data import load_samples
from edgetorch.devtools.quant_debug.recipes import Recipe, quantize

sys.path.insert(0, str(Path(__file__).parent))
import digits  # noqa: E402

SAMPLES = 32  # test images (4 batches of 8)
STAGES = ["float", "fake_quant", "edge", "portable", "xnnpack"]


@pytest.fixture(scope="module")
def report():
    return debug_quantization(digits.planted_cnn(), digits.example_inputs(),
                              digits.test_loader(SAMPLES), "xnnpack:static",
                              show_progress=False)


def test_the_planted_layer_is_ranked_first_where_the_error_enters(report):
    assert report.stages == STAGES and not report.skipped
    entry = report.entry
    assert (entry.stage, entry.layer, entry.module) == ("fake_quant", "conv2d_1", "conv2")
    assert entry.source == "digits.py:34"  # the user's line: self.conv2(x)
    ranked = report.ranking("fake_quant")
    assert list(ranked.module[:1]) == ["conv2"]
    # conv2 on float inputs loses everything; every other layer keeps > 40 dB on its own
    iso = ranked.set_index("layer").isolated_sqnr_db
    assert iso["conv2d_1"] < 1.0
    assert iso.drop("conv2d_1").min() > 40.0
    assert report.entry_stage("conv2d_1") == "fake_quant"
    assert report.module_ranking()[0] == "conv2"


def test_fake_quant_numbers_are_torchs(report):
    """The output SQNR at fake_quant is torchao's compute_error of the converted model's
    outputs (the same calibration: the first samples of the data)."""
    from torchao.quantization.utils import compute_error

    model, example = digits.planted_cnn(), digits.example_inputs()
    samples = load_samples(digits.test_loader(SAMPLES), example)
    quantized = quantize(Recipe.parse("xnnpack:static"), model, example, samples)
    with torch.no_grad():
        ref = torch.cat([model(*s.inputs) for s in samples])
        got = torch.cat([quantized.exported.module()(*s.inputs) for s in samples])
    out = report.outputs().set_index("stage")
    assert out.loc["fake_quant", "sqnr_db"] == pytest.approx(float(compute_error(ref, got)),
                                                             abs=1e-3)
    assert out.loc["fake_quant", "max_abs_err"] == pytest.approx(
        float((ref - got).abs().max()), rel=1e-6)
    assert out.loc["float", "sqnr_db"] == math.inf


def test_later_stages_agree_with_fake_quant_within_a_quantization_step(report):
    """Edge runs the same graph in torch: equal. The runtimes compute the int8 arithmetic
    itself, so a value lands on the same int8 grid point or (a rounding tie broken the other
    way, float accumulation order) the next one: one output step apart at the first layer.
    Deeper layers inherit inputs one step apart, which moves an accumulator by |w| * one
    input step; on this model that stays within a second step."""
    qranges = {la.name: la.qrange for la in report.run.layers}
    first = next(la.name for la in report.run.layers if la.qrange is not None)
    checked = 0
    for (layer, stage), acc in report.run.vs_prev.items():
        if stage == "edge":
            assert acc.max_abs == 0.0, layer
        elif stage in ("portable", "xnnpack") and qranges[layer] is not None:
            steps = acc.max_abs / qranges[layer].scale
            assert steps <= (1 if layer == first else 2) + 1e-4, (layer, stage, steps)
            checked += 1
    assert checked >= 8
    out = report.outputs().set_index("stage").sqnr_db
    assert abs(out["xnnpack"] - out["fake_quant"]) < 0.05


def test_xnnpack_values_come_from_inside_the_delegate(report):
    """The whole model is one XNNPACK delegate call: its per-layer values are the XNNPACK
    nodes' own outputs (int8, channels-last) read back as float in the Edge layout. A conv
    fused with its ReLU (XNNPACK's output clamp) reports at the ReLU."""
    wide = report.layers().set_index("layer")
    for layer in ("relu", "relu_1", "max_pool2d", "linear"):
        assert np.isfinite(wide.loc[layer, "xnnpack"]), layer
    assert math.isnan(wide.loc["conv2d", "xnnpack"])


def test_table_plot_and_text(report, tmp_path):
    table = report.table
    assert set(table.stage) == set(STAGES)
    assert {"sqnr_db", "cosine", "max_abs_err", "saturated", "isolated_sqnr_db",
            "local_drop_db", "module", "source"} <= set(table.columns)
    row = table[(table.layer == "linear") & (table.stage == "fake_quant")].iloc[0]
    assert (row.module, row.module_type, row.op, row.kind) == ("fc", "Linear", "linear",
                                                              "weighted")
    text = str(report)
    assert "the error enters at stage 'fake_quant', layer 'conv2d_1' (conv2)" in text
    fig = report.plot(tmp_path / "sqnr.png")
    assert len(fig.axes[0].lines) == len(STAGES) - 1  # one line per stage against float
    assert (tmp_path / "sqnr.png").read_bytes()[:4] == b"\x89PNG"


def test_html_report_is_self_contained_and_marks_the_entry(report, tmp_path):
    page = report.to_html(tmp_path / "r.html")
    assert "<script" not in page and "src=" not in page
    assert set(re.findall(r"https?://[^/\"]+", page)) == {"http://www.w3.org"}  # SVG namespaces
    assert re.search(r'id="entry">Error enters at stage <b>fake_quant</b>, layer '
                     r'<b>conv2d_1</b> \(module <b>conv2</b>\)', page)
    assert page.count("<svg") == 1
    assert page.count('class="entry"') == 2  # the entry row and its cell
    for la in report.run.layers:
        assert f">{la.name}</td>" in page


def test_html_report_renders_in_headless_chromium(report, tmp_path):
    page = tmp_path / "report.html"
    report.to_html(page)
    dom = rendered_dom(page, tmp_path / "profile")
    assert "Error enters at stage" in dom and "<svg" in dom
    assert dom.count("<tr") == page.read_text().count("<tr")
    data = screenshot(page, tmp_path / "report.png", (1200, 1000), tmp_path / "profile")
    assert len(data) > 20_000  # a blank page compresses to a few KB


class Heads(torch.nn.Module):
    """Attention's head split: linear, view, the model's own transpose, then back."""

    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(16, 16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.q(x).view(1, 8, 2, 8).transpose(1, 2)
        return self.out(torch.relu(h).transpose(1, 2).reshape(1, 8, 16))


def test_a_models_own_transpose_inside_xnnpack_reads_in_its_own_layout():
    """A transpose XNNPACK runs for the model (not one its lowering added for channels-last)
    gives the model's transposed value: it moves values, so its SQNR is its input's."""
    torch.manual_seed(0)
    data = [torch.randn(1, 8, 16) for _ in range(4)]
    report = debug_quantization(Heads(), (data[0],), data, "xnnpack:dynamic",
                                stages=["fake_quant", "xnnpack"], show_progress=False)
    assert report.stages == ["float", "fake_quant", "xnnpack"]
    wide = report.layers().set_index("layer").xnnpack
    assert wide["transpose"] == wide["view"] == wide["linear"]
    assert wide["transpose_1"] == wide["relu"]
    assert np.isfinite(wide["linear"]) and wide["linear"] > 30


def test_a_debug_buffer_too_small_for_one_execute_grows_and_the_sample_runs_again():
    """The size is where the captured copies start: a model whose values do not fit (a large
    model logs every dequantized weight) gets the same table with a bigger cap."""
    torch.manual_seed(0)
    model, data = Heads(), [torch.randn(1, 8, 16) for _ in range(2)]
    tables = [debug_quantization(model, (data[0],), data, "xnnpack:dynamic",
                                 stages=["fake_quant", "portable", "xnnpack"],
                                 show_progress=False, debug_buffer_size=size).table
              for size in (64, 1 << 28)]
    assert tables[0].equals(tables[1])
    assert tables[0].stage.isin(["portable", "xnnpack"]).sum() > 0
