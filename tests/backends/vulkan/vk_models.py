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


MODELS = {"accumulator": accumulator}


def build(name: str) -> tuple[torch.nn.Module, tuple]:
    from edgetorch.examples import EXAMPLES

    return EXAMPLES[name].build() if name in EXAMPLES else MODELS[name]()
