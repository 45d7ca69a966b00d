"""Seeded models for the Cortex-M tests, shared by our tests and the reference tool (torch only).

Each factory returns ``(model, example_inputs)`` from a fixed seed, so ExecuTorch (in the
reference venv) and edgetorch quantize and lower the same weights on the same calibration data.
The CNNs take NCHW inputs that the flow turns channels-last (as ``aot_arm_compiler`` does).
"""

from __future__ import annotations

import torch
from torch import nn


class SmallCnn(nn.Module):
    """conv+relu, depthwise, residual add, max pool, adaptive avg pool, linear, softmax."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = y + self.dw(y)
        y = self.pool(y)
        y = self.avg(y).flatten(1)
        return torch.softmax(self.fc(y), dim=-1)


class DsCnn(nn.Module):
    """Keyword-spotting style: strided conv + batch norm + relu6, depthwise-separable blocks,
    padded average pool, spatial mean, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, (5, 3), stride=2, padding=(2, 1)),
                                  nn.BatchNorm2d(16), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16),
                                nn.ReLU())
        self.pw = nn.Sequential(nn.Conv2d(16, 24, 1), nn.BatchNorm2d(24), nn.ReLU())
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.fc = nn.Linear(24, 6)

    def forward(self, x):
        y = self.pw(self.dw(self.stem(x)))
        y = self.pool(y).mean(dim=(2, 3))
        return self.fc(y)


class InvertedResidual(nn.Module):
    """MobileNet-style: expand, depthwise with hardswish, project, residual; maxpool with
    padding, mul by a sigmoid gate, adaptive pool, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.expand = nn.Conv2d(8, 16, 1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.project = nn.Conv2d(16, 8, 1)
        self.gate = nn.Conv2d(8, 8, 1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        z = nn.functional.hardswish(self.dw(torch.relu(self.expand(y))))
        y = y + self.project(z)
        y = y * torch.sigmoid(self.gate(y))
        y = self.pool(y)
        y = nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return self.head(y)


class Mlp(nn.Module):
    """linear+relu, linear+tanh, linear, softmax over the last dim."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 24)
        self.fc3 = nn.Linear(24, 10)

    def forward(self, x):
        y = torch.relu(self.fc1(x))
        y = torch.tanh(self.fc2(y))
        return torch.softmax(self.fc3(y), dim=-1)


class Upsample(nn.Module):
    """conv, transposed conv (stride 2), sub, clamp."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = self.up(torch.relu(self.conv(x)))
        return torch.clamp(y - self.conv2(y), -1.0, 1.0)


class BatchMatmul(nn.Module):
    """bmm of two inputs, then a batched matmul with a third (a constant right-hand side makes
    ExecuTorch 1.5.1's MatmulToBmmPass fail: 'Tensor' object has no attribute 'to_tensor')."""

    def forward(self, a, b, c):
        return torch.matmul(torch.bmm(a, b), c)


def _seeded(cls, *shapes):
    def make():
        torch.manual_seed(0)
        model = cls().eval()
        with torch.no_grad():  # batch-norm statistics that do something
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
        return model, tuple(torch.randn(*s) for s in shapes)
    return make


MODELS = {
    "small_cnn": _seeded(SmallCnn, (1, 3, 16, 16)),
    "ds_cnn": _seeded(DsCnn, (1, 1, 20, 12)),
    "inverted_residual": _seeded(InvertedResidual, (1, 3, 12, 12)),
    "mlp": _seeded(Mlp, (4, 16)),
    "upsample": _seeded(Upsample, (1, 4, 6, 6)),
    "batch_matmul": _seeded(BatchMatmul, (2, 4, 6), (2, 6, 5), (2, 5, 3)),
}
