"""Seeded models for the Ethos-U tests, shared by our tests and the reference tool (torch only).

Each factory returns ``(model, example_inputs)`` built from a fixed seed, so ExecuTorch (in the
reference venv) and edgetorch quantize and lower the same weights with the same calibration data.
"""

from __future__ import annotations

import torch
from torch import nn


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class ConvNet(nn.Module):
    """A small conv net: conv, relu, depthwise conv, relu6, add, avgpool, linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.act = nn.ReLU6()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.conv1(x))
        y = self.act(self.dw(y)) + y
        return self.fc(torch.flatten(self.pool(y), 1))


class Partial(nn.Module):
    """conv, a gt/where (which U55 refuses, so it stays on the CPU), conv: two delegates."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = self.conv1(x)
        y = torch.where(y > 0, y, y * 0.5)
        return self.conv2(y)


def add():
    torch.manual_seed(0)
    return Add().eval(), (torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8))


def convnet():
    torch.manual_seed(0)
    model = ConvNet().eval()
    return model, (torch.randn(1, 3, 16, 16),)


def partial():
    torch.manual_seed(0)
    return Partial().eval(), (torch.randn(1, 3, 8, 8),)


def _arm_model(name):
    """A model of ``tests/backends/arm/arm_models.py`` (the transformers of issue 31)."""
    def build():
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        import arm_models

        return getattr(arm_models, name)()
    return build


MODELS = {"add": add, "convnet": convnet, "partial": partial,
          "tiny_tfm": _arm_model("tiny_tfm"), "tiny_vit": _arm_model("tiny_vit"),
          "minilm_layer": _arm_model("minilm_layer"),
          "encoder_block": _arm_model("encoder_block")}
