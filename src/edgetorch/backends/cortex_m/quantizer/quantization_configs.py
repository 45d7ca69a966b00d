"""Quantization specs and configs of the Cortex-M quantizer (ExecuTorch's presets)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node
from torchao.quantization.pt2e import HistogramObserver, MinMaxObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from ..ops.arith import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT

aten = torch.ops.aten
INT8_WEIGHT_PER_TENSOR_QSPEC = QuantizationSpec(
    dtype=torch.int8, observer_or_fake_quant_ctr=MinMaxObserver,
    qscheme=torch.per_tensor_symmetric)
INT8_WEIGHT_PER_CHANNEL_QSPEC = QuantizationSpec(
    dtype=torch.int8, observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
    qscheme=torch.per_channel_symmetric, ch_axis=0)
# transposed convolution weights are IOHW: output channels on axis 1
INT8_WEIGHT_PER_CHANNEL_TRANSPOSE_QSPEC = QuantizationSpec(
    dtype=torch.int8, observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
    qscheme=torch.per_channel_symmetric, ch_axis=1)
INT8_ACTIVATION_PER_TENSOR_QSPEC = QuantizationSpec(
    dtype=torch.int8, observer_or_fake_quant_ctr=HistogramObserver,
    qscheme=torch.per_tensor_affine)
INT16_ACTIVATION_PER_TENSOR_QSPEC = QuantizationSpec(
    dtype=torch.int16, observer_or_fake_quant_ctr=MinMaxObserver,
    qscheme=torch.per_tensor_symmetric, quant_min=-32767, quant_max=32767)
SOFTMAX_OUTPUT_FIXED_QSPEC = FixedQParamsQuantizationSpec(
    dtype=torch.int8, scale=SOFTMAX_SCALE, zero_point=SOFTMAX_ZERO_POINT, quant_min=-128,
    quant_max=127, qscheme=torch.per_tensor_affine)

SOFTMAX_TARGETS = {aten._softmax.default, aten.softmax.int}
POOL_TARGETS = {aten.avg_pool2d.default, aten.max_pool2d.default,
                aten.max_pool2d_with_indices.default}
POOL_ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.hardtanh.default,
                    aten.hardtanh_.default, aten.clamp.default, aten.clamp_.default}


def _derive_bias_qparams(obs: list) -> tuple[torch.Tensor, torch.Tensor]:
    if len(obs) != 2:
        raise ValueError(f"a bias derives from 2 observers (activation, weight), got {len(obs)}")
    act_scale, _ = obs[0].calculate_qparams()
    w_scale, _ = obs[1].calculate_qparams()
    return act_scale * w_scale, torch.full_like(w_scale, fill_value=0, dtype=torch.int32)


def int32_bias_qspec(node: Node, per_channel: bool = False) -> DerivedQuantizationSpec:
    extra = dict(qscheme=torch.per_channel_symmetric, ch_axis=0) if per_channel else {}
    return DerivedQuantizationSpec(
        derived_from=((node.args[0], node), (node.args[1], node)),
        derive_qparams_fn=_derive_bias_qparams, dtype=torch.int32,
        quant_min=torch.iinfo(torch.int32).min, quant_max=torch.iinfo(torch.int32).max - 1,
        **extra)


def _pool_input(node: Node) -> Node | None:
    """The input of the pool feeding ``node`` (a clamp after a pool shares its qparams)."""
    src = node.args[0] if node.args else None
    if not isinstance(src, Node):
        return None
    if src.target is operator.getitem and isinstance(src.args[0], Node):
        src = src.args[0]
    if src.target in POOL_TARGETS and src.args and isinstance(src.args[0], Node):
        return src.args[0]
    return None


@dataclass(frozen=True)
class CortexMQuantizationConfig:
    input_activation: Any
    output_activation: Any
    weight: Any
    per_channel_bias: bool
    label: str

    def get_input_act_qspec(self, node: Node | None = None, input_node: Node | None = None):
        return self.input_activation

    def get_output_act_qspec(self, node: Node | None = None):
        if node is not None and node.target in SOFTMAX_TARGETS:
            return None if self.output_activation is None else SOFTMAX_OUTPUT_FIXED_QSPEC
        if node is not None and node.target in POOL_TARGETS and node.args \
                and isinstance(node.args[0], Node):
            return SharedQuantizationSpec((node.args[0], node))
        if node is not None and node.target in POOL_ACTIVATIONS:
            shared = _pool_input(node)
            if shared is not None:
                return SharedQuantizationSpec(shared)
        return self.output_activation

    def get_weight_qspec(self, node: Node | None = None):
        if node is not None and node.target == aten.conv_transpose2d.input \
                and isinstance(self.weight, QuantizationSpec) and self.weight.dtype == torch.int8:
            return INT8_WEIGHT_PER_CHANNEL_TRANSPOSE_QSPEC
        return self.weight

    def get_bias_qspec(self, node: Node | None = None):
        return int32_bias_qspec(node, self.per_channel_bias) if node is not None else None


INT8_PER_TENSOR_CONFIG = CortexMQuantizationConfig(
    INT8_ACTIVATION_PER_TENSOR_QSPEC, INT8_ACTIVATION_PER_TENSOR_QSPEC,
    INT8_WEIGHT_PER_TENSOR_QSPEC, False, "INT8_PER_TENSOR_CONFIG")
INT16_PER_TENSOR_CONFIG = CortexMQuantizationConfig(
    INT16_ACTIVATION_PER_TENSOR_QSPEC, INT16_ACTIVATION_PER_TENSOR_QSPEC,
    INT8_WEIGHT_PER_TENSOR_QSPEC, False, "INT16_PER_TENSOR_CONFIG")
INT8_PER_CHANNEL_CONFIG = CortexMQuantizationConfig(
    INT8_ACTIVATION_PER_TENSOR_QSPEC, INT8_ACTIVATION_PER_TENSOR_QSPEC,
    INT8_WEIGHT_PER_CHANNEL_QSPEC, True, "INT8_PER_CHANNEL_CONFIG")
