"""A small CNN trained on scikit-learn's digits (8x8 images, the data ships with sklearn), and the
same CNN with one planted bad layer.

The plant keeps the float model's function: ``conv1`` gets one more filter, a dead one (zero
weights, bias -1: its ReLU outputs 0 everywhere), and ``conv2`` reads that dead channel with
huge weights. In float, 0 * huge = 0: the outputs are the trained model's (up to the order of
float additions). Per-channel int8 weight quantization of ``conv2`` takes each filter's scale
from its outlier, so every other weight of ``conv2`` rounds to zero. The error enters at
``fake_quant`` in ``conv2`` and nowhere else.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

BATCH = 8
OUTLIER = 400.0  # times the largest |weight| of conv2


class DigitsCNN(nn.Module):
    def __init__(self, width: int = 12) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


@functools.cache
def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train x, train y, test x, test y): images [N, 1, 8, 8] in [0, 1], fixed split."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    y = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    n_test = 360
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


@functools.cache
def _trained_state() -> dict[str, torch.Tensor]:
    xtr, ytr, _, _ = digits()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights in every process
    try:
        torch.manual_seed(0)
        model = DigitsCNN()
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        xs, ys = torch.from_numpy(xtr), torch.from_numpy(ytr)
        gen = torch.Generator().manual_seed(0)
        for _ in range(4):
            order = torch.randperm(len(xs), generator=gen)
            for i in range(0, len(xs), 64):
                idx = order[i:i + 64]
                opt.zero_grad()
                F.cross_entropy(model(xs[idx]), ys[idx]).backward()
                opt.step()
    finally:
        torch.set_num_threads(threads)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def trained_cnn() -> DigitsCNN:
    model = DigitsCNN()
    model.load_state_dict(_trained_state())
    return model.eval()


def planted_cnn() -> DigitsCNN:
    """``trained_cnn`` with ``conv2`` broken for int8 only (see the module docstring)."""
    trained = trained_cnn()
    width = trained.conv1.out_channels
    model = DigitsCNN(width + 1)
    with torch.no_grad():
        model.conv1.weight.zero_()
        model.conv1.weight[:width] = trained.conv1.weight
        model.conv1.bias[:width] = trained.conv1.bias
        model.conv1.bias[width] = -1.0  # the dead filter
        model.conv2.weight[:, :width] = trained.conv2.weight
        model.conv2.weight[:, width] = OUTLIER * trained.conv2.weight.abs().max()
        model.conv2.bias.copy_(trained.conv2.bias)
        model.fc.load_state_dict(trained.fc.state_dict())
    return model.eval()


QAT_STEPS = 40


def qat_fine_tune(prepared: torch.fx.GraphModule, samples: object) -> None:
    """A user's short QAT fine-tune (the sweep's ``qat_train``): ``QAT_STEPS`` seeded Adam steps
    on batches of the training split, through ``prepare_qat_pt2e``'s fake quantizers. The
    graph was exported for batches of ``BATCH``; ``samples`` (the calibration data) are not
    needed here."""
    xtr, ytr, _, _ = digits()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights in every process
    try:
        torch.manual_seed(0)
        opt = torch.optim.Adam(prepared.parameters(), lr=1e-4)
        xs, ys = torch.from_numpy(xtr), torch.from_numpy(ytr)
        gen = torch.Generator().manual_seed(1)
        for _ in range(QAT_STEPS):
            idx = torch.randint(0, len(xs), (BATCH,), generator=gen)
            opt.zero_grad()
            F.cross_entropy(prepared(xs[idx]), ys[idx]).backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.zeros(BATCH, 1, 8, 8),)


def test_loader(count: int | None = None):
    """The test split as (x, y) batches of BATCH, as a DataLoader gives them."""
    _, _, xte, yte = digits()
    n = (len(xte) if count is None else count) // BATCH * BATCH
    ds = torch.utils.data.TensorDataset(torch.from_numpy(xte[:n]), torch.from_numpy(yte[:n]))
    return torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False)


def accuracy(model: nn.Module) -> float:
    """Top-1 (percent) on the whole test split."""
    return accuracy_on(model, len(digits()[2]))


def accuracy_on(model: nn.Module, count: int) -> float:
    """Top-1 (percent) of eager torch on the first ``count`` test images."""
    _, _, xte, yte = digits()
    with torch.no_grad():
        pred = model(torch.from_numpy(xte[:count])).argmax(-1).numpy()
    return 100.0 * float((pred == yte[:count]).mean())
