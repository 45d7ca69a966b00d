"""ExecuTorch's toy example models (``examples/models/toy_model``), same shapes and inputs.

torch only, like the rest of ``edgetorch.examples``.
"""

from __future__ import annotations

import torch
from torch import nn


class MulModule(nn.Module):
    def forward(self, input, other):
        return input * other

    def get_example_inputs(self):
        return (torch.randn(3, 2), torch.randn(3, 2))


class LinearModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, arg):
        return self.linear(arg)

    def get_example_inputs(self):
        return (torch.randn(3, 3),)


class AddModule(nn.Module):
    def forward(self, x, y):
        return x + y

    def get_example_inputs(self):
        return (torch.ones(1), torch.ones(1))


class AddMulModule(nn.Module):
    def forward(self, a, x, b):
        return torch.add(torch.mm(a, x), b)

    def get_example_inputs(self):
        return (torch.ones(2, 2), 2 * torch.ones(2, 2), 3 * torch.ones(2, 2))


class SoftmaxModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        return self.softmax(x)

    def get_example_inputs(self):
        return (torch.ones(2, 2),)


class Conv1dModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1d = nn.Conv1d(in_channels=3, out_channels=16, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv1d(x)

    def get_example_inputs(self):
        return (torch.randn(1, 3, 10),)
