"""Models the Vulkan tests need beyond ``edgetorch.examples`` (torch only: the reference venv
imports this file too)."""

from __future__ import annotations

import torch


class Accumulator(torch.nn.Module):
    """A mutable buffer whose new value a delegate computes (``self.acc += linear(x)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(4, 8))
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.acc.add_(self.lin(x))
        return self.acc * 2.0


def accumulator() -> tuple[torch.nn.Module, tuple]:
    g = torch.Generator().manual_seed(0)
    model = Accumulator()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return model.eval(), (torch.randn(4, 8, generator=g),)


class RollingCache(torch.nn.Module):
    """A KV-cache-like window: each call shifts the buffer one row and appends a new row
    (``cache.copy_(cat([cache[:, 1:], linear(x)]))``), then reads the whole window."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 4, 8))
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        window = torch.cat([self.cache[:, 1:], self.lin(x)], dim=1)
        self.cache.copy_(window)
        return torch.softmax(window, dim=1) * 2.0


def rolling_cache() -> tuple[torch.nn.Module, tuple]:
    g = torch.Generator().manual_seed(0)
    model = RollingCache()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return model.eval(), (torch.randn(1, 1, 8, generator=g),)


MODELS = {"accumulator": accumulator, "rolling_cache": rolling_cache}


def build(name: str) -> tuple[torch.nn.Module, tuple]:
    from edgetorch.examples import EXAMPLES

    return EXAMPLES[name].build() if name in EXAMPLES else MODELS[name]()
