"""Annotation helpers of ``VulkanQuantizer`` (ExecuTorch 1.5.1's ``vulkan_quantizer_utils``):
the linear annotator, qspec sharing through shape and pass-through ops, and scalars of
add/mul turned into tensor attributes."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationConfig,
    SharedQuantizationSpec,
    annotate_input_qspec_map,
    annotate_output_qspec,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)

# ExecuTorch's Vulkan quantizer keeps a copy of XNNPACK's; one serves both here.
from ...xnnpack.quantizer.xnnpack_quantizer_utils import (
    convert_scalars_to_attrs as _convert_scalars_to_attrs,
)

__all__ = ["OP_TO_ANNOTATOR", "_convert_scalars_to_attrs", "bits_to_range",
           "propagate_annotation"]


def bits_to_range(bits: int) -> tuple[int, int]:
    """The signed range of ``bits`` bits: (-2**(bits-1), 2**(bits-1) - 1)."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


Annotator = Callable[[torch.fx.GraphModule, QuantizationConfig | None,
                      Callable[[Node], bool] | None], list[list[Node]] | None]
OP_TO_ANNOTATOR: dict[str, Annotator] = {}


def register_annotator(op: str) -> Callable[[Annotator], Annotator]:
    def deco(fn: Annotator) -> Annotator:
        OP_TO_ANNOTATOR[op] = fn
        return fn
    return deco


def _is_annotated(nodes: list[Node]) -> bool:
    return any("quantization_annotation" in n.meta and n.meta["quantization_annotation"]._annotated
               for n in nodes)


def _mark_nodes_as_annotated(nodes: list[Node]) -> None:
    for n in nodes:
        if n is not None:
            n.meta.setdefault("quantization_annotation", QuantizationAnnotation())._annotated = True


@register_annotator("linear")
def _annotate_linear(gm: torch.fx.GraphModule, config: QuantizationConfig | None,
                     filter_fn: Callable[[Node], bool] | None = None) -> list[list[Node]]:
    """Each ``aten.linear``: activation, weight (and bias) inputs and its output."""
    partitions = []
    act, out = get_input_act_qspec(config), get_output_act_qspec(config)
    weight, bias = get_weight_qspec(config), get_bias_qspec(config)
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target != torch.ops.aten.linear.default:
            continue
        if (filter_fn and not filter_fn(node)) or _is_annotated([node]):
            continue
        annotate_input_qspec_map(node, node.args[0], act)
        annotate_input_qspec_map(node, node.args[1], weight)
        marked = [node, node.args[1]]
        if len(node.args) > 2 and node.args[2]:
            annotate_input_qspec_map(node, node.args[2], bias)
            marked.append(node.args[2])
        annotate_output_qspec(node, out)
        _mark_nodes_as_annotated(marked)
        partitions.append(marked)
    return partitions


_aten = torch.ops.aten
_SHARE_OBSERVER = [_aten.relu.default, _aten.hardtanh.default, _aten.hardtanh_.default,
                   _aten.max_pool2d.default, _aten.mean.default, _aten.mean.dim,
                   _aten.permute.default, _aten.permute_copy.default, _aten.squeeze.dim,
                   _aten.squeeze_copy.dim, _aten.adaptive_avg_pool2d.default,
                   _aten.view_copy.default, _aten.view.default, _aten.slice_copy.Tensor,
                   _aten.flatten.using_ints]


def propagate_annotation(model: torch.fx.GraphModule) -> None:
    """An op that does not change values (relu, views, pooling...) after a quantized output
    shares that output's quantization."""
    for n in model.graph.nodes:
        if n.op != "call_function" or n.target not in _SHARE_OBSERVER:
            continue
        prev = n.args[0]
        if not isinstance(prev, Node):
            continue
        ann = prev.meta.get("quantization_annotation")
        if not ann or not ann.output_qspec:
            continue
        if "quantization_annotation" in n.meta and n.meta["quantization_annotation"]._annotated:
            continue
        shared = SharedQuantizationSpec(prev)
        n.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={prev: shared}, output_qspec=shared, _annotated=True)
