"""Small seeded models for the Arm tests; torch only, so the reference venv can import it too.

Each factory returns ``(model, example_inputs)`` for ``edgetorch.examples.load_model_spec``
(``tests/backends/arm/arm_models.py:add``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class ConvNet(nn.Module):
    """Conv + ReLU, depthwise conv + ReLU6, a residual add, pooling and a Linear head."""

    def __init__(self, functional_relu6: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)
        self.relu6 = F.relu6 if functional_relu6 else nn.ReLU6()

    def forward(self, x):
        y = self.relu(self.conv(x))
        z = self.relu6(self.dw(y)) + y
        return self.fc(torch.flatten(self.pool(z), 1))


def _inputs(*shapes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(s, generator=gen) for s in shapes)


def add():
    return Add().eval(), _inputs((1, 3, 8, 8), (1, 3, 8, 8))


def convnet():
    torch.manual_seed(0)
    return ConvNet().eval(), _inputs((1, 3, 16, 16))


def convnet_f_relu6():
    """``convnet`` with ``F.relu6``: ExecuTorch leaves it float (two delegates); we do not."""
    torch.manual_seed(0)
    return ConvNet(functional_relu6=True).eval(), _inputs((1, 3, 16, 16))


class NoBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)

    def forward(self, x):
        return torch.relu(self.conv(x))


def nobias():
    """A bias-less strided conv (the lowering adds a zero int32 bias, trims the padding)."""
    torch.manual_seed(0)
    return NoBias().eval(), _inputs((1, 3, 10, 10))


def mv2():
    from edgetorch.examples import get_example

    return get_example("mobilenet_v2").build()
