"""``--quantize`` (and quantize_with_summary): 8da4w leaves alone the Linear layers whose weight
something else reads (nn.MultiheadAttention's out_proj, tied weights), and every mode says what
it quantized and what stayed float, and why; dynamic quantization calibrates nothing."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from torch import nn  # noqa: E402

from edgetorch.backends.xnnpack.quantizer.int4_linears import choose_linears  # noqa: E402
from edgetorch.backends.xnnpack.quantizer.recipes import quantize_with_summary  # noqa: E402
from edgetorch.cli import main  # noqa: E402

MODELS = '''\
import torch


def encoder():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             batch_first=True)
    return layer, (torch.randn(1, 8, 64),)
'''


class Tied(nn.Module):
    """An output layer tied to the embedding, a projection also read as ``.T``, and one whose
    input size is not a multiple of 32."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 64)
        self.proj = nn.Linear(64, 64)
        self.head = nn.Linear(64, 100, bias=False)
        self.head.weight = self.emb.weight
        self.odd = nn.Linear(40, 8)
        self.ok = nn.Linear(64, 8)

    def forward(self, ids):
        h = self.proj(self.emb(ids))
        return self.head(h), self.odd(h[..., :40]), h @ self.proj.weight.T, self.ok(h)


def test_8da4w_leaves_weights_read_elsewhere_in_float():
    model = Tied().eval()
    choices = {c.name: c for c in choose_linears(model, (torch.randint(0, 100, (1, 8)),), 32)}
    assert choices["ok"].quantize
    assert not choices["head"].quantize and "Embedding (emb) reads" in choices["head"].reason
    assert not choices["proj"].quantize and "(.T)" in choices["proj"].reason
    assert not choices["odd"].quantize and "input size 40" in choices["odd"].reason


def test_8da4w_multihead_attention_exports_and_runs(tmp_path, capsys):
    """Was: NotImplementedError: IntxUnpackedToInt8Tensor ... aten.t (out_proj quantized)."""
    (tmp_path / "models.py").write_text(MODELS)
    pte = tmp_path / "enc.pte"
    assert main(["export", f"{tmp_path / 'models.py'}:encoder", "--delegate", "xnnpack",
                 "--quantize", "8da4w", "-o", str(pte)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("quantized (8da4w: int4 weights in groups of 32") and \
        out[0].endswith("2 Linear of 3 weighted layers"), out
    assert out[1] == ("  left in float: 1 Linear (self_attn.out_proj): MultiheadAttention "
                      "(self_attn) reads its weight directly (multi_head_attention_forward)")
    assert out[2].startswith("wrote ")
    from edgetorch.runtime import Runtime

    x = np.random.default_rng(0).standard_normal((1, 8, 64)).astype(np.float32)
    got = Runtime.get().load_program(pte).load_method("forward").execute([x])[0]
    assert got.shape == (1, 8, 64) and np.isfinite(got).all()


@pytest.mark.parametrize("mode", ["static", "dynamic", "8da4w"])
def test_every_mode_reports_what_it_quantized(mode, capsys, monkeypatch):
    monkeypatch.setenv("EDGETORCH_PROGRESS", "1")  # bars on, though stderr is captured
    from edgetorch.examples import load_model_spec

    model, inputs = load_model_spec("cnn")  # three Conv2d, one Linear
    _, summary = quantize_with_summary(model, inputs, mode)
    kinds = sorted(layer.kind for layer in summary.quantized)
    floats = sorted(layer.kind for layer in summary.kept_float)
    text = str(summary)
    err = capsys.readouterr().err
    if mode == "static":
        assert kinds == ["Conv2d"] * 3 + ["Linear"] and not floats
        assert "calibrated on 1 sample" in text and "calibrating" in err
    else:
        assert kinds == ["Linear"] and floats == ["Conv2d"] * 3
        assert "calibrating" not in err  # nothing is calibrated
        why = ("dynamic quantization covers Linear layers only" if mode == "dynamic"
               else "8da4w quantizes Linear layers only")
        assert f"left in float: 3 Conv2d (block1.0, block2.0, block3.0): {why}" in text, text


def test_calibration_with_a_mode_that_does_not_calibrate_is_an_error(tmp_path, capsys):
    np.save(tmp_path / "0.npy", np.zeros((1, 3, 32, 32), np.float32))
    assert main(["export", "cnn", "--delegate", "xnnpack", "--quantize", "dynamic",
                 "--calibration", str(tmp_path), "-o", str(tmp_path / "m.pte")]) == 2
    assert "--calibration applies to --quantize static only" in capsys.readouterr().err
