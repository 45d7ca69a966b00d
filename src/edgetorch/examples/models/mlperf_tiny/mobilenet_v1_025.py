"""MobileNetV1 with width multiplier 0.25 for visual wake words (MLPerf Tiny, 96x96 RGB, two
classes): a stride-2 3x3 stem of 8 channels, thirteen depthwise-separable blocks (the
channel count doubles at blocks 1, 2, 4, 6 and 12, up to 256), global average pooling and a
linear classifier."""

from __future__ import annotations

import torch
from torch import nn

from ._blocks import DepthwiseSeparable, conv_bn

STEM = 8
# (stride, doubles the channels) per depthwise-separable block
BLOCKS = ((1, True), (2, True), (1, False), (2, True), (1, False), (2, True), (1, False),
          (1, False), (1, False), (1, False), (1, False), (2, True), (1, False))


class MobileNetV1025(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.num_classes = 2
        self.stem = nn.Sequential(*conv_bn(3, STEM, 3, stride=2, padding=1), nn.ReLU(inplace=True))
        blocks, channels = [], STEM
        for stride, doubles in BLOCKS:
            out = channels * 2 if doubles else channels
            blocks.append(DepthwiseSeparable(channels, out, stride=stride))
            channels = out
        self.features = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, self.num_classes)

    def forward(self, x):
        x = self.avgpool(self.features(self.stem(x)))
        return self.classifier(torch.flatten(x, 1))

    def get_example_inputs(self):
        return (torch.rand(1, 3, 96, 96) * 2 - 1,)
