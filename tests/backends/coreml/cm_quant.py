"""PT2E quantization with a ``CoreMLQuantizer`` (ExecuTorch's or edgetorch's: the same calls),
and what the converted graph's quantize/dequantize nodes say. torch and coremltools only: the
reference venv imports this file too."""

from __future__ import annotations

import torch

# name -> LinearQuantizerConfig's global config (ExecuTorch's documented 8-bit schemes)
CONFIGS = {
    "static8": {"quantization_scheme": "symmetric", "activation_dtype": torch.quint8,
                "weight_dtype": torch.qint8, "weight_per_channel": True},
    "weight8": {"quantization_scheme": "symmetric", "activation_dtype": torch.float32,
                "weight_dtype": torch.qint8, "weight_per_channel": True},
}


def quantize(model: torch.nn.Module, inputs: tuple, quantizer_cls, config: str):
    """export -> prepare_pt2e -> calibrate on ``inputs`` -> convert_pt2e: the converted module."""
    from coremltools.optimize.torch.quantization.quantization_config import (
        LinearQuantizerConfig,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = quantizer_cls(LinearQuantizerConfig.from_dict({"global_config": CONFIGS[config]}))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def qdq_params(gm: torch.fx.GraphModule) -> list[list]:
    """Each quantize/dequantize node in graph order: operator and arguments after the first
    (scales and zero points of tensors as lists), JSON-ready."""
    def value(a):
        if isinstance(a, torch.fx.Node):
            if a.op == "get_attr":
                return getattr(gm, a.target).tolist()
            return "<node>"
        return str(a) if isinstance(a, torch.dtype) else a

    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and "quantized_decomposed" in str(n.target):
            out.append([str(n.target), *[value(a) for a in n.args[1:]]])
    return out
