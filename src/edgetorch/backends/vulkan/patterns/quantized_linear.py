"""A statically quantized linear as one ``et_vk.q8ta_linear`` (``q8ta_linear_gemv`` for a
single row): int8 activations per tensor, int8 weights per output channel, int8 output.

    x_q -> dequantize_per_tensor -> [view_copy] -> mm / addmm / linear -> [view_copy]
        -> [relu] -> quantize_per_tensor
    weight_q -> dequantize_per_channel(axis 0) -> [permute_copy [1, 0] for mm/addmm]

The anchor is the matrix product. The fused op takes the int8 input and replaces the output
quantize; the per-channel weight sums the integer kernel needs become a new constant."""

from __future__ import annotations

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ....exir.dialects._ops import ops as exir_ops
from ...transforms.utils import (
    create_constant_placeholder,
    get_param_tensor,
    get_tensor_name,
    is_param_node,
    set_param_tensor,
)
from .. import utils
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement

_A = exir_ops.edge.aten
_DQ_PER_CHANNEL = exir_ops.edge.quantized_decomposed.dequantize_per_channel.default
_TRANSPOSES = {_A.permute_copy.default, _A.t_copy.default}


def _single_user(node: torch.fx.Node) -> torch.fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _is_scalar(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class QuantizedLinearMatch(PatternMatch):
    """The nodes and quantization parameters of one matched linear (``None`` fields: no
    match; see ``match``)."""

    def __init__(self, anchor: torch.fx.Node, ep: ExportedProgram | None = None) -> None:
        super().__init__([], [], [anchor], anchor)
        self.match_found = False
        is_mm = anchor.target in (_A.mm.default, _A.addmm.default)
        x_arg, w_arg = (anchor.args[1], anchor.args[2]) if anchor.target == _A.addmm.default \
            else (anchor.args[0], anchor.args[1])
        self.bias_node = anchor.args[0] if anchor.target == _A.addmm.default else (
            anchor.args[2] if len(anchor.args) > 2 else None)
        if not self._match_weight(w_arg, is_mm) or not self._match_input(x_arg):
            return
        if self.bias_node is not None and not (isinstance(self.bias_node, torch.fx.Node)
                                               and self.bias_node.op == "placeholder"):
            return
        if self._match_output(anchor):
            self.input_nodes = [n for n in (self.pattern_input_node, self.weight_node,
                                            self.weight_scales_node, self.bias_node) if n]
            self.output_nodes = [self.quantize_output_node]
            self.match_found = True

    def _match_weight(self, w: object, is_mm: bool) -> bool:
        if is_mm:
            if not isinstance(w, torch.fx.Node) or w.target not in _TRANSPOSES or (
                    w.target == _A.permute_copy.default and list(w.args[1]) != [1, 0]):
                return False
            self.all_nodes.append(w)
            w = w.args[0]
        if not isinstance(w, torch.fx.Node) or w.target != _DQ_PER_CHANNEL or w.args[3] != 0:
            return False
        self.all_nodes.append(w)
        self.weight_node, self.weight_scales_node, self.weight_zeros_node = w.args[:3]
        weight = self.weight_node
        return (isinstance(weight, torch.fx.Node) and weight.op == "placeholder"
                and isinstance(self.weight_scales_node, torch.fx.Node)
                and weight.meta["val"].dtype == torch.int8 and weight.meta["val"].dim() == 2)

    def _match_input(self, x: object) -> bool:
        if isinstance(x, torch.fx.Node) and utils.is_view_copy_node(x):
            self.all_nodes.append(x)
            x = x.args[0]
        if not (isinstance(x, torch.fx.Node) and utils.is_dequant_node(x)
                and "per_tensor" in str(x.target)):
            return False
        self.all_nodes.append(x)
        self.pattern_input_node = x.args[0]
        self.input_scale, self.input_zero_point = x.args[1], x.args[2]
        # the kernel loads input channels four at a time
        in_channels = self.pattern_input_node.meta["val"].shape[-1]
        return _is_scalar(self.input_scale) and _is_scalar(self.input_zero_point) \
            and in_channels % 4 == 0

    def _match_output(self, anchor: torch.fx.Node) -> bool:
        node, self.relu_node = _single_user(anchor), None
        if node is not None and utils.is_view_copy_node(node):
            self.all_nodes.append(node)
            node = _single_user(node)
        if node is not None and node.target == _A.relu.default:
            self.relu_node = node
            self.all_nodes.append(node)
            node = _single_user(node)
        if node is None or not utils.is_quant_node(node) or "per_tensor" not in str(node.target):
            return False
        self.all_nodes.append(node)
        self.quantize_output_node = node
        self.output_scale, self.output_zero_point = node.args[1], node.args[2]
        return _is_scalar(self.output_scale) and _is_scalar(self.output_zero_point)


_ANCHORS = {_A.mm.default, _A.addmm.default, _A.linear.default}


@register_pattern_detector("quantized_linear")
def find_quantized_linear(node: torch.fx.Node) -> QuantizedLinearMatch | None:
    if node.op != "call_function" or node.target not in _ANCHORS:
        return None
    match = QuantizedLinearMatch(node)
    return match if match.match_found else None


def pad_to_4(values: torch.Tensor) -> torch.Tensor:
    extra = -values.shape[-1] % 4
    return torch.nn.functional.pad(values, (0, extra)).contiguous() if extra else values


def align_width(ep: ExportedProgram, node: torch.fx.Node) -> None:
    """Pad a per-channel constant to a multiple of 4 channels, as the GPU kernel reads them
    four at a time (once per constant, however many linears read it)."""
    if not utils.register_param_mutation(ep, node, "width aligned to 4"):
        return
    values = get_param_tensor(ep, node)
    assert values is not None
    padded = pad_to_4(values)
    if padded is not values:
        set_param_tensor(ep, node, padded)
        mode = detect_fake_mode([node.meta.get("val")])
        node.meta["val"] = mode.from_tensor(padded, static_shapes=True) if mode else padded


def _weight_sums(ep: ExportedProgram, graph: torch.fx.Graph,
                 match: QuantizedLinearMatch) -> torch.fx.Node:
    """A constant holding each output channel's sum of int8 weights (int32), padded to a
    multiple of 4 channels."""
    weight = get_param_tensor(ep, match.weight_node)
    assert weight is not None
    sums = pad_to_4(weight.to(torch.int32).sum(dim=1).to(torch.int32).contiguous())
    return weight_sums_constant(ep, graph, match.weight_node, sums)


def weight_sums_constant(ep: ExportedProgram, graph: torch.fx.Graph, weight: torch.fx.Node,
                         sums: torch.Tensor) -> torch.fx.Node:
    """``sums`` as a new parameter ``<weight's name>_sums``, placed first in the graph."""
    name = (get_tensor_name(ep, weight) + "_sums").replace(".", "_")
    with graph.inserting_before(next(iter(graph.nodes))):
        return create_constant_placeholder(ep, graph, name, InputKind.PARAMETER, sums)


@register_pattern_replacement("quantized_linear")
def replace_quantized_linear(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                             match: QuantizedLinearMatch) -> None:
    constants = (match.weight_node, match.weight_scales_node, match.bias_node)
    if not all(n is None or is_param_node(ep, n) for n in constants) or match.weight_node is None:
        return
    graph = graph_module.graph
    sums = _weight_sums(ep, graph, match)
    for constant in (match.weight_scales_node, match.bias_node):
        if constant is not None:
            align_width(ep, constant)
    rows = match.pattern_input_node.meta["val"].shape
    single_row = len(rows) < 2 or rows[-2] == 1
    target = exir_ops.edge.et_vk.q8ta_linear_gemv.default if single_row \
        else exir_ops.edge.et_vk.q8ta_linear.default
    out = match.quantize_output_node
    with graph.inserting_before(out):
        fused = graph.create_node("call_function", target, args=(
            match.pattern_input_node, float(match.input_scale), int(match.input_zero_point),
            match.weight_node, sums, match.weight_scales_node, float(match.output_scale),
            int(match.output_zero_point), match.bias_node,
            "relu" if match.relu_node is not None else "none"))
    fused.meta["val"] = out.meta["val"]
    out.replace_all_uses_with(fused)
