"""Deep AutoEncoder for anomaly detection (MLPerf Tiny, ToyADMOS): 640 inputs through nine
linear + batch norm + ReLU layers (128 wide, an 8-wide bottleneck in the middle) and a linear
layer back to 640."""

from __future__ import annotations

import torch
from torch import nn

HIDDEN = (128, 128, 128, 128, 8, 128, 128, 128, 128)


class DeepAutoEncoder(nn.Module):
    def __init__(self, input_dim: int = 640) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for dim in HIDDEN:
            layers += [nn.Linear(width, dim), nn.BatchNorm1d(dim), nn.ReLU(inplace=True)]
            width = dim
        self.encoder_decoder = nn.Sequential(*layers)
        self.output_layer = nn.Linear(width, input_dim)

    def forward(self, x):
        return self.output_layer(self.encoder_decoder(x))

    def get_example_inputs(self):
        return (torch.rand(1, 640) * 2 - 1,)
