"""A torchao 4-bit linear as one Vulkan operator:

- weight-only, ``IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(G))``
  -> ``et_vk.linear_q4gsw(x, weights, weight_scales, G, bias)``.

``to_edge`` decomposes the weight's ``dequantize_affine`` (see ``torchao_4bit``); the linear
becomes ``mm``/``addmm`` of its transpose (``linear`` when kept whole):

    weight dequantize [N, K] -> permute_copy [1, 0] -> mm(x, .) / addmm(bias, x, .)

anchored on the matrix product. The int8 weight is packed to 4 bits (the layout the 4-bit
embedding shares), the scales [N, K/G] are stored transposed, [K/G, N] with N padded to a
multiple of 4, and so is the bias. The kernel loads input channels four at a time:
``K % 4 != 0`` stays unfused, as do asymmetric weights (the kernel subtracts 8)."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from ...transforms.utils import get_param_tensor, is_param_node
from .. import utils
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement
from .quantized_linear import _align_width, _pad_to_4
from .torchao_4bit import (
    GroupDequantize,
    _replace_param,
    in_4bit_range,
    is_symmetric,
    repack_4bit_weight,
)

_A = exir_ops.edge.aten
_TRANSPOSES = {_A.permute_copy.default, _A.t_copy.default}
_ANCHORS = {_A.mm.default, _A.addmm.default, _A.linear.default}
LINEAR_SCALES_4BIT = "4 bit linear scales"


class Quantized4bitLinearMatch(PatternMatch):
    def __init__(self, anchor: torch.fx.Node) -> None:
        super().__init__([], [anchor], [anchor], anchor)
        self.match_found = False
        is_addmm = anchor.target == _A.addmm.default
        x, w = (anchor.args[1], anchor.args[2]) if is_addmm else anchor.args[:2]
        self.bias_node = anchor.args[0] if is_addmm else (
            anchor.args[2] if len(anchor.args) > 2 else None)
        if anchor.target != _A.linear.default:
            if not (isinstance(w, torch.fx.Node) and w.target in _TRANSPOSES) or (
                    w.target == _A.permute_copy.default and list(w.args[1]) != [1, 0]):
                return
            self.all_nodes.append(w)
            w = w.args[0]
        dq = GroupDequantize(w)
        if not dq.found or not dq.groups_tile_rows():
            return
        self.all_nodes += dq.nodes
        self.dequantize, self.group_size = dq, dq.group_size
        if not isinstance(x, torch.fx.Node) or utils.is_dequant_node(x) \
                or x.meta["val"].shape[-1] % 4:
            return  # an int8 input is another pattern's; the kernel reads 4 channels a load
        if self.bias_node is not None and not (isinstance(self.bias_node, torch.fx.Node)
                                               and self.bias_node.op == "placeholder"):
            return
        self.pattern_input_node = x
        self.input_nodes = [n for n in (x, dq.weight_node, dq.scales_node, self.bias_node) if n]
        self.match_found = True


@register_pattern_detector("torchao_quantized_linear_4bit")
def find_quantized_4bit_linear(node: torch.fx.Node) -> Quantized4bitLinearMatch | None:
    if node.op != "call_function" or node.target not in _ANCHORS:
        return None
    match = Quantized4bitLinearMatch(node)
    return match if match.match_found else None


def _store_scales_transposed(ep: ExportedProgram, scales_node: torch.fx.Node) -> None:
    """[N, groups] -> [groups, N4] (N padded to a multiple of 4), once per scales tensor."""
    if not utils.register_param_mutation(ep, scales_node, LINEAR_SCALES_4BIT):
        return
    scales = get_param_tensor(ep, scales_node)
    assert scales is not None
    _replace_param(ep, scales_node, _pad_to_4(scales.reshape(scales.shape[0], -1)
                                              .transpose(0, 1).contiguous()))


@register_pattern_replacement("torchao_quantized_linear_4bit")
def replace_quantized_4bit_linear(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                                  match: Quantized4bitLinearMatch) -> None:
    dq = match.dequantize
    constants = (dq.weight_node, dq.scales_node, match.bias_node)
    if not all(n is None or is_param_node(ep, n) for n in constants) \
            or not is_symmetric(ep, dq) or not in_4bit_range(ep, dq.weight_node):
        return
    repack_4bit_weight(ep, dq.weight_node)
    _store_scales_transposed(ep, dq.scales_node)
    if match.bias_node is not None:
        _align_width(ep, match.bias_node)
    anchor = match.anchor_node
    with graph_module.graph.inserting_before(anchor):
        fused = graph_module.graph.create_node(
            "call_function", exir_ops.edge.et_vk.linear_q4gsw.default,
            args=(match.pattern_input_node, dq.weight_node, dq.scales_node, match.group_size,
                  match.bias_node))
    fused.meta["val"] = anchor.meta["val"]
    anchor.replace_all_uses_with(fused)
