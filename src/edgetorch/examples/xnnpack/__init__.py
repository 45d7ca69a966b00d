"""ExecuTorch's ``examples/xnnpack``: which models the XNNPACK script quantizes, and how."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class QuantType(Enum):
    NONE = 1
    STATIC_PER_TENSOR = 2  # operations without weights
    STATIC_PER_CHANNEL = 3  # CNN/RNN models with convolutions
    DYNAMIC_PER_CHANNEL = 4  # linear layers and transformers


@dataclass
class XNNPACKOptions:
    quantization: QuantType
    delegation: bool


# ExecuTorch's entries for the models edgetorch has, plus the built-in examples.
MODEL_NAME_TO_OPTIONS: dict[str, XNNPACKOptions] = {
    "linear": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "add": XNNPACKOptions(QuantType.STATIC_PER_TENSOR, True),
    "add_mul": XNNPACKOptions(QuantType.STATIC_PER_TENSOR, True),
    "mv2": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "resnet18": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "tiny_classifier": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "simple_model": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "mlp": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "cnn": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "mobilenet_v2": XNNPACKOptions(QuantType.STATIC_PER_CHANNEL, True),
    "transformer_encoder": XNNPACKOptions(QuantType.DYNAMIC_PER_CHANNEL, True),
    "bert_encoder": XNNPACKOptions(QuantType.DYNAMIC_PER_CHANNEL, True),
    "llama_decoder": XNNPACKOptions(QuantType.DYNAMIC_PER_CHANNEL, True),
}

__all__ = ["MODEL_NAME_TO_OPTIONS", "QuantType", "XNNPACKOptions"]
