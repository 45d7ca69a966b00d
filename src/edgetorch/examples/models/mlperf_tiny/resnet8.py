"""ResNet-8 for CIFAR-10 (MLPerf Tiny image classification): a 3x3 stem of 16 channels, three
residual stages of 16, 32 and 64 channels (the last two halve the resolution, with a 1x1
projection on the skip path), global average pooling and a linear head."""

from __future__ import annotations

import torch
from torch import nn

from ._blocks import conv_bn

WIDTHS = (16, 32, 64)


class _Residual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.path_a = nn.Sequential(*conv_bn(c_in, c_out, 3, stride=stride, padding=1), nn.ReLU(),
                                    *conv_bn(c_out, c_out, 3, padding=1))
        projected = stride != 1 or c_in != c_out
        self.skip = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False) if projected \
            else nn.Identity()
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.path_a(x) + self.skip(x))


class ResNet8(nn.Module):
    def __init__(self, n_classes: int = 10) -> None:
        super().__init__()
        self.entry = nn.Sequential(*conv_bn(3, WIDTHS[0], 3, padding=1), nn.ReLU())
        self.stages = nn.Sequential(_Residual(WIDTHS[0], WIDTHS[0], 1),
                                    _Residual(WIDTHS[0], WIDTHS[1], 2),
                                    _Residual(WIDTHS[1], WIDTHS[2], 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(WIDTHS[-1], n_classes)

    def forward(self, x):
        x = self.pool(self.stages(self.entry(x)))
        return self.head(torch.flatten(x, 1))

    def get_example_inputs(self):
        return (torch.rand(1, 3, 32, 32) * 2 - 1,)
