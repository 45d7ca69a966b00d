"""A torchao 4-bit weight-only quantized embedding (``IntxWeightOnlyConfig(torch.int4,
PerGroup(G))``) as one ``et_vk.embedding_q4gsw``. ``to_edge`` decomposes torchao's
``dequantize_affine`` into

    q [V, D] int8 -> view [V, D/G, G] -> float -(zero point, viewed and cast)
      * scales viewed [V, D/G, 1] -> view [V, D] -> embedding(., indices)

which is what is matched here, anchored on the embedding. The int8 table is repacked once
(``utils.register_param_mutation``) into the 4-bit layout linear layers read (two values a
byte, the even column in the low nibble, each stored + 8), so a table tied to an LM head
is packed one way. The kernel reads rows 32 values at a time: ``D % 32 != 0`` stays unfused."""

from __future__ import annotations

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram

from ....errors import PassError
from ....exir.dialects._ops import ops as exir_ops
from ...transforms.utils import get_param_tensor, set_param_tensor
from .. import utils
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement

_A = exir_ops.edge.aten
_CASTS = {_A._to_copy.default, exir_ops.edge.dim_order_ops._to_dim_order_copy.default}
_VIEWS = {_A.view_copy.default}
LINEAR_WEIGHT_4BIT = "4 bit linear weight"


def _to_placeholder(node: object, through: set, chain: list) -> torch.fx.Node | None:
    """The placeholder ``node`` reads through ops in ``through`` (each added to ``chain``)."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" \
            and node.target in through:
        chain.append(node)
        node = node.args[0]
    return node if isinstance(node, torch.fx.Node) and node.op == "placeholder" else None


class QuantizedEmbeddingMatch(PatternMatch):
    def __init__(self, embedding: torch.fx.Node) -> None:
        super().__init__([], [embedding], [embedding], embedding)
        self.match_found = False
        table, self.indices_node = embedding.args[0], embedding.args[1]
        if not (isinstance(table, torch.fx.Node) and table.target in _VIEWS):
            return
        mul = table.args[0]
        if not (isinstance(mul, torch.fx.Node) and mul.target == _A.mul.Tensor):
            return
        self.all_nodes += [table, mul]
        if not self._match_dequantize(mul):
            return
        # stable across a tied sibling's repacking: the dequantized table's own shape
        rows, embed_dim = table.meta["val"].shape
        grouped = self.values_view.args[1]
        self.group_size = int(grouped[-1]) if len(grouped) == 3 else 0
        if self.group_size <= 0 or embed_dim % self.group_size or embed_dim % 32:
            return
        self.input_nodes = [self.weight_node, self.scales_node, self.indices_node]
        self.match_found = True

    def _match_dequantize(self, mul: torch.fx.Node) -> bool:
        for values, scales in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
            scale_chain: list = []
            scales_node = _to_placeholder(scales, _VIEWS, scale_chain)
            if scales_node is None or not isinstance(values, torch.fx.Node):
                continue
            zero_point, value_chain = None, []
            if values.target == _A.sub.Tensor:
                zp_chain: list = []
                zero_point = _to_placeholder(values.args[1], _VIEWS | _CASTS, zp_chain)
                if zero_point is None:
                    continue
                value_chain += [values, *zp_chain]
                values = values.args[0]
            weight = _to_placeholder(values, _VIEWS | _CASTS, value_chain)
            views = [n for n in value_chain if n.target in _VIEWS and n.args[0] is weight]
            if weight is None or not views or views[0].meta["val"].dtype != torch.int8:
                continue
            self.weight_node, self.scales_node, self.zero_point_node = \
                weight, scales_node, zero_point
            self.values_view = views[0]
            self.all_nodes += scale_chain + value_chain
            return True
        return False


@register_pattern_detector("torchao_quantized_embedding")
def find_quantized_embedding(node: torch.fx.Node) -> QuantizedEmbeddingMatch | None:
    if node.op != "call_function" or node.target != _A.embedding.default:
        return None
    match = QuantizedEmbeddingMatch(node)
    return match if match.match_found else None


def pack_4bit_linear(values: torch.Tensor) -> torch.Tensor:
    """int8 values in [-8, 7], [rows, cols] with even cols -> uint8 [rows, cols / 2]: the
    even column + 8 in the low nibble, the odd column + 8 in the high one."""
    biased = (values.to(torch.int16) + 8).to(torch.uint8)
    return (biased[:, 0::2] | (biased[:, 1::2] << 4)).contiguous()


def _repack_table(ep: ExportedProgram, weight_node: torch.fx.Node) -> bool:
    """Pack the int8 table in place; False (left as it is) when it is not 4-bit."""
    table = get_param_tensor(ep, weight_node)
    if table is None or table.dtype != torch.int8 or table.shape[-1] % 2 \
            or int(table.min()) < -8 or int(table.max()) > 7:
        return False
    packed = pack_4bit_linear(table)
    set_param_tensor(ep, weight_node, packed)
    mode = detect_fake_mode([weight_node.meta.get("val")])
    weight_node.meta["val"] = mode.from_tensor(packed, static_shapes=True) if mode else packed
    return True


@register_pattern_replacement("torchao_quantized_embedding")
def replace_quantized_embedding(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                                match: QuantizedEmbeddingMatch) -> None:
    # the kernel subtracts 8 from every nibble: symmetric quantization only
    if match.zero_point_node is not None:
        zero_point = get_param_tensor(ep, match.zero_point_node)
        if zero_point is None or bool(torch.any(zero_point != 0)):
            return
    if utils.register_param_mutation(ep, match.weight_node, LINEAR_WEIGHT_4BIT) \
            and not _repack_table(ep, match.weight_node):
        raise PassError(f"FusePatternsPass: embedding table %{match.weight_node.name} is not int8 in [-8, 7]; "
                         "it cannot be packed as 4-bit")
    embedding = match.anchor_node
    with graph_module.graph.inserting_before(embedding):
        fused = graph_module.graph.create_node(
            "call_function", exir_ops.edge.et_vk.embedding_q4gsw.default,
            args=(match.weight_node, match.scales_node, match.group_size, match.indices_node,
                  True))
    fused.meta["val"] = embedding.meta["val"]
    embedding.replace_all_uses_with(fused)
