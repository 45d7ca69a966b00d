"""A small CNN that touches every common vision op: conv, BN, ReLU and three pooling kinds."""

from __future__ import annotations

import torch
from torch import nn

from ._init import kaiming_convs, randomize_batchnorm


def _conv_bn_relu(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    )


class SmallCNN(nn.Module):
    """Three conv blocks on a 32x32 RGB image, pooled by max, avg and adaptive-avg pooling."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.block1 = _conv_bn_relu(3, 16)
        self.pool1 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.block2 = _conv_bn_relu(16, 32)
        self.pool2 = nn.AvgPool2d(kernel_size=2, stride=2)
        self.block3 = _conv_bn_relu(32, 64)
        self.pool3 = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.block1(x))
        x = self.pool2(self.block2(x))
        x = self.pool3(self.block3(x))
        return self.fc(torch.flatten(x, 1))


def cnn() -> SmallCNN:
    """Build the seeded SmallCNN in eval mode, with randomised BatchNorm statistics."""
    torch.manual_seed(0)
    model = SmallCNN()
    kaiming_convs(model)
    randomize_batchnorm(model)
    return model.eval()
