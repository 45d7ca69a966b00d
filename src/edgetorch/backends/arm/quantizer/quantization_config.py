"""``get_symmetric_quantization_config``: ExecuTorch 1.5.1's Arm int8 config, on torchao PT2E.

Activations int8 [-128, 127] per-tensor affine (histogram observer; QAT: fused moving-average
fake-quant; dynamic: placeholder), weights int8 [-127, 127] symmetric per output channel (axis 0)
or per tensor, bias int32 derived as ``input_scale * weight_scale`` (zero point 0, range
[-2**31 + 1, 2**31 - 1]). Every observer's eps is ``2**-16`` unless given.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.fx import Node
from torchao.quantization.pt2e import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    QuantizationConfig,
    QuantizationSpec,
)

INT32 = torch.iinfo(torch.int32)


def _derive_bias_qparams(obs_or_fqs: list) -> tuple[torch.Tensor, torch.Tensor]:
    if len(obs_or_fqs) != 2:
        raise ValueError(f"bias qparams derive from an activation and a weight observer, "
                         f"got {len(obs_or_fqs)} observers")
    act_scale, _ = obs_or_fqs[0].calculate_qparams()
    weight_scale, _ = obs_or_fqs[1].calculate_qparams()
    return ((act_scale * weight_scale).to(torch.float32),
            torch.full_like(weight_scale, fill_value=0, dtype=torch.int32))


def bias_qspec(config: QuantizationConfig, node: Node) -> DerivedQuantizationSpec | None:
    """The int32 bias spec of a conv/linear ``node`` (derived from its input and weight)."""
    if config.bias is None or config.weight is None:
        return None
    per_channel = config.weight.qscheme == torch.per_channel_symmetric
    return DerivedQuantizationSpec(
        derived_from=[(node.args[0], node), (node.args[1], node)],  # type: ignore[list-item]
        derive_qparams_fn=_derive_bias_qparams, dtype=torch.int32,
        quant_min=INT32.min + 1, quant_max=INT32.max,
        qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
        ch_axis=config.weight.ch_axis if per_channel else None)


def _activation_observer(is_qat: bool, is_dynamic: bool, eps: float) -> Any:
    """The observer (or fake-quantizer, for QAT) of activations, as ExecuTorch's Arm configs
    choose it: a histogram for static PTQ, a placeholder for dynamic, fused moving-average
    fake quantization for static QAT."""
    if not is_qat:
        return (PlaceholderObserver if is_dynamic else HistogramObserver).with_args(eps=eps)
    if is_dynamic:
        return FakeQuantize.with_args(
            eps=eps, observer=MovingAverageMinMaxObserver.with_args(averaging_constant=1))
    return FusedMovingAvgObsFakeQuantize.with_args(eps=eps)


@functools.lru_cache
def get_symmetric_quantization_config(is_per_channel: bool = True, is_qat: bool = False,
                                      is_dynamic: bool = False, act_qmin: int = -128,
                                      act_qmax: int = 127, weight_qmin: int = -127,
                                      weight_qmax: int = 127, eps: float = 2**-16
                                      ) -> QuantizationConfig:
    """ExecuTorch's Arm default: int8 activations, int8 per-channel weights, int32 bias."""
    act = QuantizationSpec(dtype=torch.int8, quant_min=act_qmin, quant_max=act_qmax,
                           qscheme=torch.per_tensor_affine, is_dynamic=is_dynamic,
                           observer_or_fake_quant_ctr=_activation_observer(is_qat, is_dynamic, eps))
    if is_qat:
        weight_ctr = (FakeQuantize.with_args(
            observer=PerChannelMinMaxObserver, quant_min=weight_qmin, quant_max=weight_qmax,
            dtype=torch.qint8, qscheme=torch.per_channel_symmetric, reduce_range=False,
            ch_axis=0, eps=eps) if is_per_channel else FakeQuantize.with_args(eps=eps))
    else:
        weight_ctr = (PerChannelMinMaxObserver if is_per_channel else MinMaxObserver).with_args(eps=eps)
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=weight_qmin, quant_max=weight_qmax,
        qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric,
        ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=weight_ctr)
    # ``bias`` only needs to be non-None here: the real spec is derived per node (bias_qspec).
    bias = QuantizationSpec(dtype=torch.int32, quant_min=INT32.min + 1, quant_max=INT32.max,
                            qscheme=torch.per_tensor_symmetric,
                            observer_or_fake_quant_ctr=PlaceholderObserver)
    return QuantizationConfig(act, None if is_dynamic else act, weight, bias, is_qat)


def get_symmetric_a8w4_quantization_config(is_per_channel: bool = True, is_qat: bool = True,
                                           is_dynamic: bool = False) -> QuantizationConfig:
    """ExecuTorch's 8A4W config: the int8 default with weights in [-7, 7] (int4 values held in
    int8). QAT by default, as in ExecuTorch."""
    return get_symmetric_quantization_config(is_per_channel, is_qat, is_dynamic,
                                             weight_qmin=-7, weight_qmax=7)


@functools.lru_cache
def get_symmetric_a16w8_quantization_config(is_per_channel: bool = True, is_qat: bool = False,
                                            is_dynamic: bool = False, weight_qmin: int = -127,
                                            weight_qmax: int = 127, epsilon: float = 2**-12
                                            ) -> QuantizationConfig:
    """ExecuTorch's 16A8W config: int16 activations, symmetric per tensor over
    [-32767, 32767] (eps ``epsilon``), with the weights and bias of the int8 default."""
    del weight_qmin, weight_qmax  # as in ExecuTorch: they name the config, nothing more
    int16 = torch.iinfo(torch.int16)
    act = QuantizationSpec(dtype=torch.int16, quant_min=int16.min + 1, quant_max=int16.max,
                           qscheme=torch.per_tensor_symmetric, is_dynamic=is_dynamic,
                           observer_or_fake_quant_ctr=_activation_observer(is_qat, is_dynamic,
                                                                           epsilon))
    base = get_symmetric_quantization_config(is_per_channel=is_per_channel, is_qat=is_qat,
                                             is_dynamic=is_dynamic)
    return QuantizationConfig(act, None if is_dynamic else act, base.weight, base.bias, is_qat)
