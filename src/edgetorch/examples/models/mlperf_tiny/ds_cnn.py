"""DS-CNN for keyword spotting (MLPerf Tiny): 49x10 MFCC features, a 10x4 stride-2
convolution of 64 channels, four depthwise-separable blocks, average pooling over the whole
24x5 map and a linear classifier over 12 keywords."""

from __future__ import annotations

import torch
from torch import nn

from ._blocks import DepthwiseSeparable, conv_bn

CHANNELS = 64


class DSCNNKWS(nn.Module):
    def __init__(self, num_classes: int = 12) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.input_height, self.input_width, self.input_channels = 49, 10, 1
        self.feature_extractor = nn.Sequential(
            *conv_bn(self.input_channels, CHANNELS, (10, 4), stride=(2, 2), padding=(5, 1)),
            nn.ReLU(inplace=True), nn.Dropout(p=0.2),
            *(DepthwiseSeparable(CHANNELS, CHANNELS) for _ in range(4)),
            nn.Dropout(p=0.4))
        self.pool = nn.AvgPool2d(kernel_size=(24, 5))
        self.classifier = nn.Linear(CHANNELS, num_classes)

    def forward(self, x):
        x = self.pool(self.feature_extractor(x))
        return self.classifier(torch.flatten(x, 1))

    def get_example_inputs(self):
        return (torch.rand(1, 1, 49, 10) * 2 - 1,)
