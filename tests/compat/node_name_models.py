"""Small models for the Edge node-name compat test (importable by both environments)."""

from __future__ import annotations

import torch


class CumsumConvs(torch.nn.Module):
    """Two convolutions (names get ``_1``), batch norm, max pool (a ``getitem``), cumsum."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.lin = torch.nn.Linear(16, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)
        y = self.conv2(y) + y
        return self.lin(torch.cumsum(y.flatten(1), dim=1)[:, :16]).sigmoid()


def cumsum_convs():
    return CumsumConvs().eval(), (torch.randn(1, 3, 10, 10),)
