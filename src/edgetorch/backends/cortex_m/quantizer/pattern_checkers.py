"""Which chains of ops the Cortex-M quantizer annotates as one quantized unit (``PATTERNS``),
and the checks each chain must pass (ExecuTorch's ``quantizer_support.py`` and
``pattern_checkers.py``)."""

from __future__ import annotations

import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import (
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
    QuantizationSpecBase,
    SharedQuantizationSpec,
)

from ...arm.quantizer.arm_quantizer_utils import PatternCheck
from ..ops.arith import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT
from ..ops.layout import is_channel_broadcast, is_channels_last

aten = torch.ops.aten
PER_TENSOR = (torch.per_tensor_affine, torch.per_tensor_symmetric)


def _fake(node: Node) -> torch.Tensor:
    val = node.meta["val"]
    return val[0] if isinstance(val, (tuple, list)) else val


def _per_tensor(q) -> bool:
    return isinstance(q, QuantizationSpecBase) and getattr(q, "qscheme", None) in PER_TENSOR


def _int8_act(cfg, out_node: Node | None = None) -> bool:
    i, o = cfg.get_input_act_qspec(), cfg.get_output_act_qspec(out_node)
    return isinstance(i, QuantizationSpecBase) and isinstance(o, QuantizationSpecBase) \
        and i.dtype == torch.int8 and o.dtype == torch.int8


class AddMulCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        for n in nodes:
            if not isinstance(n.kwargs.get("alpha", 1), int):
                return False
            if len(n.all_input_nodes) == 2:
                a, b = (_fake(x) for x in n.all_input_nodes)
                if a.shape != b.shape and not (is_channel_broadcast(a, b) and is_channels_last(a)):
                    return False
        return True

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        return _per_tensor(cfg.get_input_act_qspec()) \
            and _per_tensor(cfg.get_output_act_qspec()) and _int8_act(cfg)


class DivCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        return all(len(n.all_input_nodes) != 2
                   or _fake(n.all_input_nodes[0]).shape == _fake(n.all_input_nodes[1]).shape
                   for n in nodes)

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        i, o = cfg.get_input_act_qspec(), cfg.get_output_act_qspec()
        return _per_tensor(i) and _per_tensor(o) and isinstance(i, QuantizationSpec) \
            and isinstance(o, QuantizationSpec) and i.dtype in (torch.int8, torch.int16) \
            and i.dtype == o.dtype


class ConvCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        return all(is_channels_last(_fake(n)) for n in nodes)

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        w = cfg.get_weight_qspec(nodes[0] if nodes else None)
        return isinstance(w, QuantizationSpec) and w.ch_axis in (0, None) and _int8_act(cfg)


class LinearCheck(PatternCheck):
    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        return _int8_act(cfg)


class ActivationCheck(PatternCheck):
    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        return _int8_act(cfg) and _per_tensor(cfg.get_input_act_qspec()) \
            and _per_tensor(cfg.get_output_act_qspec())


class SoftmaxCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        n = nodes[0]
        t = _fake(n)
        rank = len(t.shape)
        dim = (n.args[1] if len(n.args) > 1 else -1) % rank
        if is_channels_last(t):
            return dim == (1 if rank >= 2 else rank - 1)
        return dim == rank - 1

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        out = cfg.get_output_act_qspec(nodes[-1])
        return _int8_act(cfg, nodes[-1]) and _per_tensor(cfg.get_input_act_qspec()) \
            and _per_tensor(out) and isinstance(out, FixedQParamsQuantizationSpec) \
            and out.scale == SOFTMAX_SCALE and out.zero_point == SOFTMAX_ZERO_POINT


class ConvTransposeCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        for n in nodes:
            if not is_channels_last(_fake(n)):
                return False
            a = n.args
            if len(a) >= 6 and isinstance(a[5], (list, tuple)) and any(p != 0 for p in a[5]):
                return False
            if len(a) >= 7 and isinstance(a[6], int) and a[6] > 1:
                return False
            if len(a) >= 8 and isinstance(a[7], (list, tuple)) and any(d != 1 for d in a[7]):
                return False
        return True

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        w = cfg.get_weight_qspec(nodes[0] if nodes else None)
        return isinstance(w, QuantizationSpec) and w.ch_axis in (1, None) and _int8_act(cfg)


class AvgPoolCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        return bool(nodes) and (nodes[0].args[6] if len(nodes[0].args) > 6 else None) is None

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        i, o = cfg.get_input_act_qspec(), cfg.get_output_act_qspec(nodes[-1])
        if isinstance(o, SharedQuantizationSpec):
            o = i
        ok = (QuantizationSpec, FixedQParamsQuantizationSpec)
        return isinstance(i, ok) and isinstance(o, ok) and i.dtype == o.dtype == torch.int8 \
            and _per_tensor(i) and _per_tensor(o)


class BmmCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        for n in nodes:
            if len(n.all_input_nodes) == 2:
                a, b = (_fake(x) for x in n.all_input_nodes)
                if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] \
                        or a.shape[2] != b.shape[1]:
                    return False
        return True

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        return _per_tensor(cfg.get_input_act_qspec()) \
            and _per_tensor(cfg.get_output_act_qspec()) and _int8_act(cfg)


class MaxPoolCheck(PatternCheck):
    @classmethod
    def check_pattern(cls, nodes):
        n = nodes[0]
        dil = n.args[4] if len(n.args) > 4 else (1, 1)
        dil = tuple(dil) * (2 if len(tuple(dil)) == 1 else 1)
        ceil = bool(n.args[5]) if len(n.args) > 5 and n.args[5] is not None else False
        if tuple(dil[:2]) != (1, 1) or ceil:
            # annotated, but left to the portable kernel by the lowering
            n.meta.setdefault("custom", {}).setdefault("cortex_m", {})[
                "skip_quantized_max_pool2d"] = True
        return True

    @classmethod
    def check_quantization_config(cls, nodes, cfg):
        i, o = cfg.get_input_act_qspec(), cfg.get_output_act_qspec(nodes[0])
        return isinstance(o, SharedQuantizationSpec) \
            and isinstance(i, (QuantizationSpec, FixedQParamsQuantizationSpec)) \
            and i.dtype == torch.int8 and _per_tensor(i)


_CLAMPS = (aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
           aten.clamp.default, aten.clamp_.default)
_FUSED = (aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
          aten.hardsigmoid.default, aten.hardsigmoid_.default, aten.clamp.default,
          aten.clamp_.default)


def _with(base, fused, check) -> dict:
    table = {}
    for op in base:
        table[(op,)] = check
        for act in fused:
            table[(op, act)] = check
    return table


PATTERNS: dict[tuple, type[PatternCheck]] = {
    **_with((aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.sub_.Tensor), _CLAMPS,
            AddMulCheck),
    **{(op,): AddMulCheck for op in (aten.mul.Tensor, aten.mul_.Tensor, aten.hardswish.default,
                                     aten.hardswish_.default)},
    (aten.div.Tensor,): DivCheck, (aten.div_.Tensor,): DivCheck,
    **_with((aten.linear.default,), _FUSED, LinearCheck),
    **_with((aten.conv2d.default,), _FUSED, ConvCheck),
    (aten._softmax.default,): SoftmaxCheck, (aten.softmax.int,): SoftmaxCheck,
    **_with((aten.conv_transpose2d.input,), _FUSED, ConvTransposeCheck),
    (aten.avg_pool2d.default,): AvgPoolCheck,
    **_with((aten.max_pool2d.default, aten.max_pool2d_with_indices.default),
            (aten.relu.default, aten.hardtanh.default, aten.clamp.default), MaxPoolCheck),
    (aten.bmm.default,): BmmCheck,
    **{(op,): ActivationCheck for op in (
        aten.sigmoid.default, aten.sigmoid_.default, aten.tanh.default, aten.tanh_.default,
        aten.silu.default, aten.silu_.default, aten.gelu.default, aten.log.default,
        aten.log_.default, aten.log2.default, aten.log2_.default, aten.log10.default,
        aten.log10_.default, aten.log1p.default, aten.log1p_.default, aten.sqrt.default,
        aten.sqrt_.default, aten.rsqrt.default, aten.rsqrt_.default)},
}
# The per-channel annotator sees convolutions and the activations that may follow them.
CONV_TARGETS = {aten.conv2d.default, aten.conv_transpose2d.input, *_FUSED}
