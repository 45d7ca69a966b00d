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


class TwoLinears(torch.nn.Module):
    """128 -> 64 (ReLU) -> 32: channel counts ExecuTorch 1.5.1's 4-bit linear fusion takes
    (its reference kernel fails on output channels that are not a multiple of 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(128, 64)
        self.l2 = torch.nn.Linear(64, 32, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x)))


def two_linears() -> tuple[torch.nn.Module, tuple]:
    g = torch.Generator().manual_seed(0)
    model = TwoLinears()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval(), (torch.randn(4, 128, generator=g),)


def torchao_quantize(model: torch.nn.Module, mode: str) -> torch.nn.Module:
    """torchao ``quantize_`` of every linear, in place: ``q4gsw`` 4-bit weights with one
    scale per 16 input channels (``IntxWeightOnlyConfig``), ``8da4w`` the same weights
    with dynamically quantized int8 activations (``Int8DynamicActivationIntxWeightConfig``)."""
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
        quantize_,
    )
    from torchao.utils import unwrap_tensor_subclass

    config = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(16)) \
        if mode == "q4gsw" else Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(16))
    quantize_(model, config)
    return unwrap_tensor_subclass(model)


TORCHAO_QUANT = ("q4gsw", "8da4w")

MODELS = {"accumulator": accumulator, "rolling_cache": rolling_cache,
          "two_linears": two_linears}


def build(name: str) -> tuple[torch.nn.Module, tuple]:
    from edgetorch.examples import EXAMPLES

    return EXAMPLES[name].build() if name in EXAMPLES else MODELS[name]()
