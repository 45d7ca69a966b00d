"""A torchao 4-bit weight-only quantized embedding (``IntxWeightOnlyConfig(torch.int4,
PerGroup(G))``) as one ``et_vk.embedding_q4gsw``. ``to_edge`` decomposes torchao's
``dequantize_affine`` into

    q [V, D] int8 -> view [V, D/G, G] -> float -(zero point, viewed and cast)
      * scales viewed [V, D/G, 1] -> view [V, D] -> embedding(., indices)

which is what is matched here (``torchao_4bit.GroupDequantize``), anchored on the embedding.
The int8 table is repacked once (``utils.register_param_mutation``) into the 4-bit layout linear layers read (two values a
byte, the even column in the low nibble, each stored + 8), so a table tied to an LM head
is packed one way. The kernel reads rows 32 values at a time: ``D % 32 != 0`` stays unfused."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement
from .torchao_4bit import GroupDequantize, is_symmetric, repack_4bit_weight

_A = exir_ops.edge.aten


class QuantizedEmbeddingMatch(PatternMatch):
    def __init__(self, embedding: torch.fx.Node) -> None:
        super().__init__([], [embedding], [embedding], embedding)
        self.match_found = False
        self.indices_node = embedding.args[1]
        dq = GroupDequantize(embedding.args[0])
        if not dq.found:
            return
        self.all_nodes += dq.nodes
        if not dq.groups_tile_rows() or dq.cols % 32:
            return
        self.dequantize, self.group_size = dq, dq.group_size
        self.weight_node, self.scales_node = dq.weight_node, dq.scales_node
        self.input_nodes = [self.weight_node, self.scales_node, self.indices_node]
        self.match_found = True


@register_pattern_detector("torchao_quantized_embedding")
def find_quantized_embedding(node: torch.fx.Node) -> QuantizedEmbeddingMatch | None:
    if node.op != "call_function" or node.target != _A.embedding.default:
        return None
    match = QuantizedEmbeddingMatch(node)
    return match if match.match_found else None


@register_pattern_replacement("torchao_quantized_embedding")
def replace_quantized_embedding(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                                match: QuantizedEmbeddingMatch) -> None:
    if not is_symmetric(ep, match.dequantize):
        return
    repack_4bit_weight(ep, match.weight_node)
    embedding = match.anchor_node
    with graph_module.graph.inserting_before(embedding):
        fused = graph_module.graph.create_node(
            "call_function", exir_ops.edge.et_vk.embedding_q4gsw.default,
            args=(match.weight_node, match.scales_node, match.group_size, match.indices_node,
                  True))
    fused.meta["val"] = embedding.meta["val"]
    embedding.replace_all_uses_with(fused)
