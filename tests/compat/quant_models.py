"""Quantized models shared by edgetorch's tests and the ExecuTorch reference tool: this file
imports only torch and torchao, so both environments build the very same programs.

``build(name)`` returns ``(exported_program, example_inputs, eager)`` where ``eager`` is the
converted (fake-quant) model the .pte must match, and ``CONFIG[name]`` the
``ExecutorchBackendConfig`` options (``do_quant_fusion_and_const_prop`` for the embeddings).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.export import export


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 64)

    def forward(self, idx):
        return self.emb(idx) * 2.0


def _pt2e(model: nn.Module, example: tuple, dynamic: bool = False):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    gm = export(model.eval(), example).module()
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=dynamic))
    prepared = prepare_pt2e(gm, quantizer)
    gen = torch.Generator().manual_seed(7)
    for _ in range(4):  # calibrate on inputs like the example
        prepared(*(torch.randn(t.shape, generator=gen) for t in example))
    converted = convert_pt2e(prepared)
    return export(converted, example), converted


def _embedding(weight_dtype, granularity):
    from torchao.quantization import IntxWeightOnlyConfig, quantize_

    torch.manual_seed(3)
    model = Embed().eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=weight_dtype, granularity=granularity),
              lambda m, fqn: isinstance(m, nn.Embedding))
    example = (torch.tensor([[0, 3, 19, 7], [5, 5, 1, 12]]),)
    return export(model, example), example, model


def build(name: str):
    from torchao.quantization.granularity import PerAxis, PerGroup

    torch.manual_seed(0)
    if name in ("mlp", "mlp_dynamic"):
        example = (torch.randn(4, 16, generator=torch.Generator().manual_seed(1)),)
        ep, eager = _pt2e(MLP(), example, dynamic=name == "mlp_dynamic")
        return ep, example, eager
    if name == "cnn":
        example = (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)
        ep, eager = _pt2e(CNN(), example)
        return ep, example, eager
    if name == "embedding_int8":
        return _embedding(torch.int8, PerAxis(0))
    if name == "embedding_int4":
        return _embedding(torch.int4, PerGroup(32))
    if name == "embedding_int2":
        return _embedding(torch.int2, PerGroup(32))
    raise KeyError(name)


MODELS = ("mlp", "mlp_dynamic", "cnn", "embedding_int8", "embedding_int4", "embedding_int2")
CONFIG = {name: {"do_quant_fusion_and_const_prop": True} for name in MODELS
          if name.startswith("embedding")}
