"""Small models for the debug-handle compat test (importable by both environments)."""

from __future__ import annotations

import torch


class ConvReluLinear(torch.nn.Module):
    """The model of ExecuTorch's devtools facts: conv -> relu -> linear (linear decomposes
    into permute_copy + addmm, which share one handle)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.linear = torch.nn.Linear(144, 5)

    def forward(self, x):
        return self.linear(torch.relu(self.conv(x)).flatten(1))


class Branchy(torch.nn.Module):
    """Nested ``torch.cond``: handles continue inside the branches, breadth first."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        def true_fn(x, y):
            return (self.lin(x) + y).relu()

        def false_fn(x, y):
            return torch.cond(y.sum() > 0, lambda a, b: a - b, lambda a, b: a * b, (x, y))

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


def conv_relu_linear():
    return ConvReluLinear(), (torch.randn(1, 3, 8, 8),)


def branchy():
    g = torch.Generator().manual_seed(2)
    return Branchy(), (torch.randn(2, 4, generator=g), torch.randn(2, 4, generator=g))
