"""Quantizing a model the same way on both sides of the compat tests (torch and torchao only).

``quantize(model, inputs, mode, quantizer_cls, config_fn)`` runs the PT2E flow with the given
``XNNPACKQuantizer`` class (ExecuTorch's in the reference venv, edgetorch's here) or torchao's
``quantize_`` (8da4w), and returns the exported quantized program. ``summarize(gm)`` renders a
converted graph as plain JSON-able data (ops, arguments, and every constant's bytes hashed),
so two converted graphs compare with ``==``.
"""

from __future__ import annotations

import hashlib

import torch

MODES = ("fp32", "static", "static_per_tensor", "dynamic", "8da4w")


class LinearHeavy(torch.nn.Module):
    """A linear-heavy model (every input size a multiple of 32, as 8da4w wants)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, 64)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def build(name: str):
    """``(model, example inputs)`` of a built-in example or of ``linear_heavy``."""
    if name == "linear_heavy":
        torch.manual_seed(0)
        return LinearHeavy().eval(), (torch.randn(4, 256, generator=torch.Generator()
                                                  .manual_seed(0)),)
    from edgetorch.examples import EXAMPLES

    return EXAMPLES[name].build()


def converted_module(model, inputs, mode, quantizer_cls, config_fn, calibration=None):
    """The PT2E-converted ``GraphModule`` (static / dynamic modes)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    cfg = config_fn(is_per_channel=mode != "static_per_tensor", is_dynamic=mode == "dynamic")
    gm = torch.export.export(model.eval(), inputs).module()
    prepared = prepare_pt2e(gm, quantizer_cls().set_global(cfg))
    for sample in calibration or [inputs]:
        prepared(*sample)
    return convert_pt2e(prepared)


def quantize(model, inputs, mode, quantizer_cls=None, config_fn=None):
    """``(exported program, the quantized eager callable)`` for ``mode`` ("fp32": none)."""
    if mode == "fp32":
        return torch.export.export(model.eval(), inputs), model
    if mode == "8da4w":
        from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
        from torchao.quantization.granularity import PerGroup

        quantize_(model, Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
            filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and m.in_features % 32 == 0)
        return torch.export.export(model.eval(), inputs), model
    converted = converted_module(model, inputs, mode, quantizer_cls, config_fn)
    if mode == "dynamic":  # one chain per linear, as ExecuTorch's LLM export does
        try:
            from executorch.backends.transforms.duplicate_dynamic_quant_chain import (
                DuplicateDynamicQuantChainPass,
            )
        except ImportError:  # our environment: edgetorch's pass of the same name
            from edgetorch.backends.transforms.duplicate_dynamic_quant_chain import (
                DuplicateDynamicQuantChainPass,
            )
        DuplicateDynamicQuantChainPass()(converted)
    return torch.export.export(converted, inputs), converted


def _render(a):
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if isinstance(a, (list, tuple)):
        return [_render(v) for v in a]
    if isinstance(a, dict):
        return {k: _render(v) for k, v in a.items()}
    if isinstance(a, float):
        return float.hex(a)  # exact
    if isinstance(a, (bool, int, str)) or a is None:
        return a
    return str(a)


def tensor_digest(t: torch.Tensor) -> str:
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return f"{t.dtype}{list(t.shape)}:{hashlib.sha256(raw).hexdigest()[:16]}"


def summarize(gm: torch.fx.GraphModule) -> list:
    """One entry per node: op, target, arguments (constants as dtype, shape and digest)."""
    out = []
    for n in gm.graph.nodes:
        entry = [n.op, n.name, str(n.target), _render(n.args), _render(n.kwargs)]
        if n.op == "get_attr":
            value = gm
            for part in str(n.target).split("."):
                value = getattr(value, part)
            entry.append(tensor_digest(value) if isinstance(value, torch.Tensor) else str(value))
        out.append(entry)
    return out
