"""A quantized pixel shuffle as one ``et_vk.q8ta_pixel_shuffle``:

    dequantize_per_tensor -> [clone] -> pixel_shuffle(r) -> [clone] -> quantize_per_tensor

``aten.pixel_shuffle`` stays whole through ``to_edge`` because the partitioner lists it in
``ops_to_not_decompose``. The anchor is the dequantize; the fused op replaces the quantize."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from .. import utils
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement

_A = exir_ops.edge.aten
_PASSTHROUGH = {_A.clone.default, exir_ops.edge.dim_order_ops._clone_dim_order.default}


def _only_user(node: torch.fx.Node, skipped: list) -> torch.fx.Node | None:
    """``node``'s single user, past any chain of single-user clones (added to ``skipped``)."""
    while len(node.users) == 1:
        node = next(iter(node.users))
        if node.op != "call_function" or node.target not in _PASSTHROUGH:
            return node
        skipped.append(node)
    return None


class QuantizedPixelShuffleMatch(PatternMatch):
    def __init__(self, dequantize: torch.fx.Node, shuffle: torch.fx.Node,
                 quantize: torch.fx.Node, clones: list) -> None:
        super().__init__([dequantize.args[0]], [quantize],
                         [dequantize, *clones, shuffle, quantize], dequantize)
        self.input_scale, self.input_zero_point = dequantize.args[1], dequantize.args[2]
        self.output_scale, self.output_zero_point = quantize.args[1], quantize.args[2]
        self.upscale_factor = shuffle.args[1]


@register_pattern_detector("quantized_pixel_shuffle")
def find_quantized_pixel_shuffle(node: torch.fx.Node) -> QuantizedPixelShuffleMatch | None:
    if node.op != "call_function" or not utils.is_dequant_node(node):
        return None
    clones: list = []
    shuffle = _only_user(node, clones)
    if shuffle is None or shuffle.target != _A.pixel_shuffle.default or len(shuffle.args) < 2 \
            or not isinstance(shuffle.args[1], int):
        return None
    quantize = _only_user(shuffle, clones)
    if quantize is None or not utils.is_quant_node(quantize):
        return None
    # the fused kernel takes per-tensor scalars; a per-channel or node scale stays unfused
    if not all(isinstance(a, (int, float)) for a in (*node.args[1:3], *quantize.args[1:3])):
        return None
    return QuantizedPixelShuffleMatch(node, shuffle, quantize, clones)


@register_pattern_replacement("quantized_pixel_shuffle")
def replace_quantized_pixel_shuffle(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                                    match: QuantizedPixelShuffleMatch) -> None:
    quantize = match.output_nodes[0]
    with graph_module.graph.inserting_before(quantize):
        fused = graph_module.graph.create_node(
            "call_function", exir_ops.edge.et_vk.q8ta_pixel_shuffle.default,
            args=(match.input_nodes[0], float(match.input_scale), int(match.input_zero_point),
                  1.0 / float(match.output_scale), int(match.output_zero_point),
                  match.upscale_factor))
    fused.meta["val"] = quantize.meta["val"]
    quantize.replace_all_uses_with(fused)
