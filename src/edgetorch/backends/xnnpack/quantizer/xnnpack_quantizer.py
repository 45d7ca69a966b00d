"""``XNNPACKQuantizer``: PT2E annotations for what XNNPACK runs in int8 (ExecuTorch's names).

Use it with torchao's flow::

    gm = torch.export.export(model.eval(), example).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(gm, quantizer)     # prepare_qat_pt2e for QAT
    prepared(*example)                          # calibrate
    converted = convert_pt2e(prepared)

Specs (ExecuTorch 1.5.1's): int8 activations in [-128, 127], per-tensor affine (histogram
observer; dynamic: computed at run time; QAT: fused moving-average fake quantize); int8
weights in [-127, 127], symmetric, per tensor or per output channel (axis 0); no bias spec
(XNNPACK quantizes the bias itself); every observer's eps is 2**-12.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node
from torchao.quantization.pt2e import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import (
    OperatorConfig,
    QuantizationConfig,
    QuantizationSpec,
    Quantizer,
    get_module_name_filter,
)

from ....errors import ExportError
from .xnnpack_quantizer_utils import (
    OP_TO_ANNOTATOR,
    convert_scalars_to_attrs,
    propagate_annotation,
)

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config"]

aten = torch.ops.aten
EPS = 2**-12


@functools.lru_cache
def get_symmetric_quantization_config(
    is_per_channel: bool = False,
    is_qat: bool = False,
    is_dynamic: bool = False,
    act_qmin: int = -128,
    act_qmax: int = 127,
    weight_qmin: int = -127,
    weight_qmax: int = 127,
) -> QuantizationConfig:
    """The config XNNPACK runs: int8 affine activations, symmetric int8 weights.

    Cached, so equal arguments give the same object (configs are compared by identity when
    patterns are registered)."""
    act_args: dict[str, Any] = {"eps": EPS}
    if is_qat and is_dynamic:
        act_ctr: Any = FakeQuantize
        act_args["observer"] = MovingAverageMinMaxObserver.with_args(averaging_constant=1)
    elif is_qat:
        act_ctr = FusedMovingAvgObsFakeQuantize
    else:
        act_ctr = PlaceholderObserver if is_dynamic else HistogramObserver
    act = QuantizationSpec(
        dtype=torch.int8, quant_min=act_qmin, quant_max=act_qmax,
        qscheme=torch.per_tensor_affine, is_dynamic=is_dynamic,
        observer_or_fake_quant_ctr=act_ctr.with_args(**act_args))

    w_args: dict[str, Any] = {"eps": EPS}
    if is_qat:
        w_ctr: Any = FusedMovingAvgObsFakeQuantize
        w_args["observer"] = (MovingAveragePerChannelMinMaxObserver if is_per_channel
                              else MovingAverageMinMaxObserver)
    else:
        w_ctr = PerChannelMinMaxObserver if is_per_channel else MinMaxObserver
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=weight_qmin, quant_max=weight_qmax,
        qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric,
        ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=w_ctr.with_args(**w_args))
    # Dynamic quantization has no output spec: the next op quantizes its own input.
    return QuantizationConfig(act, None if is_dynamic else act, weight, None, is_qat)


def _supported_config_and_operators() -> list[OperatorConfig]:
    ops = [
        [[torch.nn.Conv2d, torch.nn.ReLU], [torch.nn.Conv2d, torch.nn.functional.relu],
         [torch.nn.functional.conv2d, torch.nn.ReLU],
         [torch.nn.functional.conv2d, torch.nn.functional.relu]],
        [[torch.nn.Linear], [torch.nn.functional.linear]],
        [[torch.add]],
        [[torch.nn.AdaptiveAvgPool2d], [torch.nn.functional.adaptive_avg_pool2d]],
    ]
    configs = [get_symmetric_quantization_config(is_per_channel=pc, is_qat=qat)
               for pc in (False, True) for qat in (False, True)]
    return [OperatorConfig(cfg, pattern) for cfg in configs for pattern in ops]


def _module_type_filter(tp: Callable) -> Callable[[Node], bool]:
    """True for nodes traced inside a module of type ``tp`` (at any depth)."""
    name = f"{tp.__module__}.{tp.__qualname__}"

    def accepts(n: Node) -> bool:
        for _, t in n.meta.get("nn_module_stack", {}).values():
            if (f"{t.__module__}.{t.__qualname__}" if isinstance(t, type) else t) == name:
                return True
        return False
    return accepts


def _not_under(types: list[Callable], names: list[str]) -> Callable[[Node], bool]:
    filters = [_module_type_filter(t) for t in types] + [get_module_name_filter(m) for m in names]
    return lambda n: not any(f(n) for f in filters)


@dataclass
class QuantPattern:
    """A pattern and which configs annotate it: static ones always, dynamic ones only when
    ``is_dynamic``, QAT ones only when ``is_qat``."""

    name: str
    is_dynamic: bool
    is_qat: bool
    op_overloads: set


CONV_TARGETS = {aten.conv2d.default, aten.conv1d.default, aten.convolution.default}
CONV_TRANSPOSE_TARGETS = {aten.conv_transpose1d, aten.conv_transpose1d.default,
                          aten.conv_transpose2d, aten.conv_transpose2d.input,
                          aten.conv_transpose3d, aten.conv_transpose3d.input}
LINEAR_TARGETS = {aten.linear.default}


class XNNPACKQuantizer(Quantizer):
    """Annotates the patterns XNNPACK runs quantized, per global, module-type, module-name
    and operator-type configs (a ``None`` config leaves that part float).

    Precedence, as in ExecuTorch: module-name configs, then module-type configs, then
    operator-type configs, then the global one; the last two skip nodes under any module
    named in the first two. A node annotated once keeps its first annotation."""

    supported_config_and_operators = _supported_config_and_operators()
    SUPPORTED_PATTERNS = [
        QuantPattern("conv_bn_relu", False, True, CONV_TARGETS),
        QuantPattern("conv_bn", False, True, CONV_TARGETS),
        QuantPattern("conv_transpose_bn_relu", False, True, CONV_TRANSPOSE_TARGETS),
        QuantPattern("conv_transpose_bn", False, True, CONV_TRANSPOSE_TARGETS),
        QuantPattern("linear_relu", False, False, LINEAR_TARGETS),
        QuantPattern("linear", True, False, LINEAR_TARGETS),
        QuantPattern("conv", True, False, CONV_TARGETS),
        QuantPattern("conv_transpose", True, False, CONV_TRANSPOSE_TARGETS),
        QuantPattern("conv_relu", False, False, CONV_TARGETS),
        QuantPattern("conv_transpose_relu", False, False, CONV_TRANSPOSE_TARGETS),
        QuantPattern("adaptive_avg_pool2d", False, False, {aten.adaptive_avg_pool2d.default}),
        QuantPattern("add_relu", False, False, {aten.add.Tensor}),
        QuantPattern("add", False, False, {aten.add.Tensor}),
        QuantPattern("mul_relu", False, False, {aten.mul.Tensor}),
        QuantPattern("mul", False, False, {aten.mul.Tensor}),
        QuantPattern("cat", False, False, {aten.cat.default}),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.global_config: QuantizationConfig | None = None
        self.operator_type_config: dict[Any, QuantizationConfig | None] = {}
        self.module_type_config: dict[Callable, QuantizationConfig | None] = {}
        self.module_name_config: dict[str, QuantizationConfig | None] = {}
        self.filter_fn: Callable[[Node], bool] | None = None

    @classmethod
    def get_supported_quantization_configs(cls) -> list[QuantizationConfig]:
        return list({cfg for cfg, _ in cls.supported_config_and_operators})

    @classmethod
    def get_supported_operator_for_quantization_config(
            cls, quantization_config: QuantizationConfig | None) -> list:
        if quantization_config is None:
            return [p for _, ops in cls.supported_config_and_operators for p in ops]
        return next((ops for cfg, ops in cls.supported_config_and_operators
                     if cfg == quantization_config), [])

    @classmethod
    def get_supported_operators(cls) -> list[OperatorConfig]:
        return cls.supported_config_and_operators

    # -- knobs (each returns self) ---------------------------------------------------------

    def set_global(self, quantization_config: QuantizationConfig | None) -> XNNPACKQuantizer:
        self.global_config = quantization_config
        return self

    def set_operator_type(self, operator_type: Any,
                          quantization_config: QuantizationConfig | None) -> XNNPACKQuantizer:
        """Quantize only the patterns whose operator is ``operator_type`` (e.g.
        ``torch.ops.aten.linear.default``) with this config."""
        self.operator_type_config[operator_type] = quantization_config
        return self

    def set_module_type(self, module_type: Callable,
                        quantization_config: QuantizationConfig | None) -> XNNPACKQuantizer:
        """Quantize the patterns inside modules of this type with this config (``None``
        keeps them float)."""
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(self, module_name: str,
                        quantization_config: QuantizationConfig | None) -> XNNPACKQuantizer:
        """Quantize the patterns inside the submodule ``module_name`` (e.g. ``"blocks.0"``)."""
        if quantization_config is None:
            raise ExportError(
                f"XNNPACKQuantizer.set_module_name({module_name!r}, None): a None config is "
                "not supported by module name (ExecuTorch 1.5.1 refuses it too); to keep that "
                "part float, use set_module_type(<its type>, None) or set_filter_function("
                "lambda node: ...) returning False for its nodes")
        self.module_name_config[module_name] = quantization_config
        return self

    def set_filter_function(self, filter_fn: Callable[[Node], bool] | None) -> XNNPACKQuantizer:
        """Only nodes for which ``filter_fn(node)`` is True are quantized (with any config)."""
        self.filter_fn = filter_fn
        return self

    # -- the Quantizer interface ------------------------------------------------------------

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        return convert_scalars_to_attrs(model)

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        names = list(self.module_name_config)
        types = list(self.module_type_config)
        for name, cfg in self.module_name_config.items():
            self._annotate_all_patterns(model, cfg, get_module_name_filter(name))
        for tp, cfg in self.module_type_config.items():
            self._annotate_all_patterns(model, cfg, _module_type_filter(tp))
        outside = _not_under(types, names)
        for op, cfg in self.operator_type_config.items():
            self._annotate_all_patterns(model, cfg, outside, op)
        self._annotate_all_patterns(model, self.global_config, outside)
        propagate_annotation(model)
        return model

    def _annotate_all_patterns(self, model: torch.fx.GraphModule,
                               cfg: QuantizationConfig | None,
                               filter_fn: Callable[[Node], bool] | None = None,
                               operator_target: Any = None) -> torch.fx.GraphModule:
        if cfg is None:  # leaves float what no other config annotated
            return model

        def combined(n: Node) -> bool:
            return all(f(n) for f in (self.filter_fn, filter_fn) if f is not None)

        dynamic = cfg.input_activation is not None and cfg.input_activation.is_dynamic
        for pattern in self.SUPPORTED_PATTERNS:
            if operator_target is not None and operator_target not in pattern.op_overloads:
                continue
            if (dynamic and pattern.is_dynamic) or (cfg.is_qat and pattern.is_qat) \
                    or not dynamic:
                OP_TO_ANNOTATOR[pattern.name](model, cfg, combined)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass
