"""``VulkanQuantizer``: the PT2E quantizer of ExecuTorch 1.5.1's Vulkan backend.

It quantizes ``linear`` only: weights per output channel, symmetric, 8 or 4 bits
(``get_symmetric_quantization_config(weight_bits=...)``), either weight-only (the preprocess
makes ``aten._weight_int8pack_mm`` / ``et_vk.linear_qcs4w`` of them) or with dynamically
quantized 8-bit per-token activations (``is_dynamic=True``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch.fx import Node
from torchao.quantization.pt2e import PerChannelMinMaxObserver, PlaceholderObserver
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec, Quantizer

from .vulkan_quantizer_utils import (
    OP_TO_ANNOTATOR,
    _convert_scalars_to_attrs,
    bits_to_range,
    propagate_annotation,
)

__all__ = ["VulkanQuantizer", "get_symmetric_quantization_config"]


@functools.lru_cache
def get_symmetric_quantization_config(
        is_dynamic: bool = False, weight_bits: int = 8, act_bits: int = 8,
        act_qmin: int | None = None, act_qmax: int | None = None,
        weight_qmin: int | None = None, weight_qmax: int | None = None) -> QuantizationConfig:
    """Weights int8-stored, per channel (axis 0), symmetric, ``weight_bits`` of range;
    with ``is_dynamic`` also activations per tensor, affine, 8 bits, observed at run time.
    Ranges default to the full signed range of the bit width."""
    assert weight_bits in {8, 4}, f"Unsupported weight quantization bits: {weight_bits}"
    assert act_bits in {8}, f"Unsupported activation quantization bits: {act_bits}"
    lo, hi = bits_to_range(weight_bits)
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=lo if weight_qmin is None else weight_qmin,
        quant_max=hi if weight_qmax is None else weight_qmax,
        qscheme=torch.per_channel_symmetric, ch_axis=0, is_dynamic=False,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver)
    act = None
    if is_dynamic:
        alo, ahi = bits_to_range(act_bits)
        act = QuantizationSpec(
            dtype=torch.int8, quant_min=alo if act_qmin is None else act_qmin,
            quant_max=ahi if act_qmax is None else act_qmax,
            qscheme=torch.per_tensor_affine, is_dynamic=True,
            observer_or_fake_quant_ctr=PlaceholderObserver)
    return QuantizationConfig(input_activation=act, output_activation=None, weight=weight,
                              bias=None, is_qat=False)


_SUPPORTED_OPS = ["linear"]


class VulkanQuantizer(Quantizer):
    def __init__(self) -> None:
        super().__init__()
        self.global_config: QuantizationConfig | None = None
        self.filter_fn: Callable[[Node], bool] | None = None

    def set_global(self, quantization_config: QuantizationConfig) -> VulkanQuantizer:
        self.global_config = quantization_config
        return self

    def set_filter_function(self, filter_fn: Callable[[Node], bool]) -> VulkanQuantizer:
        """Quantize only the nodes ``filter_fn`` accepts."""
        self.filter_fn = filter_fn
        return self

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        return _convert_scalars_to_attrs(model)

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        if self.global_config is not None:
            for op in _SUPPORTED_OPS:
                OP_TO_ANNOTATOR[op](model, self.global_config,
                                    self.filter_fn if self.filter_fn is not None else None)
        propagate_annotation(model)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass
