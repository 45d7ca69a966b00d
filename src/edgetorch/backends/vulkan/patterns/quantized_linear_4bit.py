"""A torchao 4-bit linear as one Vulkan operator:

- weight-only, ``IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(G))``
  -> ``et_vk.linear_q4gsw(x, weights, weight_scales, G, bias)``;
- 8da4w, ``Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, PerGroup(G))``, whose
  input is quantized to int8 per row and dequantized again (decomposed too):

      x -> mul(., reciprocal(scale) * 1) -> round -> + zero point -> clamp -> int8
        -> float - zero point -> * scale -> linear

  -> ``et_vk.linear_dq8ca_q4gsw(x, scale, zero point, weights, weight_sums, weight_scales,
  G, bias)``, the per-row scale and zero point still computed by the graph (``choose_qparams``
  decomposed) and ``weight_sums`` a new constant: each group's int4 sum per output channel,
  ``[groups, N8]``.

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
from ...transforms.utils import (
    get_param_tensor,
    is_param_node,
)
from .. import utils
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement
from .quantized_linear import align_width, pad_to_4, weight_sums_constant
from .torchao_4bit import (
    CASTS,
    VIEWS,
    GroupDequantize,
    in_4bit_range,
    is_symmetric,
    repack_4bit_weight,
    replace_param,
)

_A = exir_ops.edge.aten
_TRANSPOSES = {_A.permute_copy.default, _A.t_copy.default}
_ANCHORS = {_A.mm.default, _A.addmm.default, _A.linear.default}
LINEAR_SCALES_4BIT = "4 bit linear scales"


def _through(node: object, ops: set, chain: list) -> object:
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in ops:
        chain.append(node)
        node = node.args[0]
    return node


def _is_call(node: object, target) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target == target


class DynamicInputQuantize:
    """The decomposed per-row int8 quantize-dequantize of a linear's input (``found``):
    ``input_node`` (the float rows), ``scale_node``, ``zero_point_node`` and the nodes
    that only quantize and dequantize (``nodes``)."""

    def __init__(self, x: object) -> None:
        self.found, self.nodes = False, []
        chain: list = []
        mul = _through(x, VIEWS, chain)
        if not _is_call(mul, _A.mul.Tensor):
            return
        chain.append(mul)
        for values, scale in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
            attempt = list(chain)
            if self._match(values, _through(scale, VIEWS, attempt), attempt):
                self.found = True
                return

    def _match(self, sub: object, scale: object, chain: list) -> bool:
        if not _is_call(sub, _A.sub.Tensor) or not isinstance(scale, torch.fx.Node):
            return False
        nodes = [*chain, sub]
        q = _through(sub.args[0], VIEWS | CASTS, nodes)
        zero_point = _through(sub.args[1], VIEWS | CASTS, nodes)
        if not (isinstance(q, torch.fx.Node) and isinstance(zero_point, torch.fx.Node)):
            return False
        # q: the clamped, rounded, shifted product of the rows and 1 / scale
        clamp = q
        if not _is_call(clamp, _A.clamp.default) or tuple(clamp.args[1:3]) != (-128, 127):
            return False  # int8's range: anything else is not what the kernel quantizes to
        add = clamp.args[0]
        if not _is_call(add, _A.add.Tensor):
            return False
        zp_chain: list = []  # in the match, so one value reaches both inside a delegate
        rounded, zp = add.args[0], _through(add.args[1], VIEWS | CASTS, zp_chain)
        if not _is_call(rounded, _A.round.default) or zp is not zero_point:
            return False
        product = rounded.args[0]
        if not _is_call(product, _A.mul.Tensor):
            return False
        for rows, inverse in ((product.args[0], product.args[1]),
                              (product.args[1], product.args[0])):
            recip = inverse.args[0] if _is_call(inverse, _A.mul.Tensor) else inverse
            if _is_call(recip, _A.reciprocal.default) \
                    and _through(recip.args[0], VIEWS, []) is scale:
                self.input_node, self.scale_node, self.zero_point_node = rows, scale, zero_point
                # the reciprocal too: the fused op needs no 1 / scale
                self.nodes = nodes + zp_chain + [add, rounded, product, recip] + (
                    [inverse] if inverse is not recip else [])
                return isinstance(rows, torch.fx.Node) and rows.meta["val"].dim() == 2
        return False


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
        self.dynamic = DynamicInputQuantize(x)
        if self.dynamic.found:
            self.all_nodes += self.dynamic.nodes
            x = self.dynamic.input_node
        if not isinstance(x, torch.fx.Node) or utils.is_dequant_node(x) \
                or x.meta["val"].shape[-1] % 4:
            return  # an int8 input is another pattern's; the kernel reads 4 channels a load
        if self.bias_node is not None and not (isinstance(self.bias_node, torch.fx.Node)
                                               and self.bias_node.op == "placeholder"):
            return
        self.pattern_input_node = x
        extra = (self.dynamic.scale_node, self.dynamic.zero_point_node) \
            if self.dynamic.found else ()
        self.input_nodes = [n for n in (x, *extra, dq.weight_node, dq.scales_node,
                                        self.bias_node) if n]
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
    replace_param(ep, scales_node, pad_to_4(scales.reshape(scales.shape[0], -1)
                                              .transpose(0, 1).contiguous()))


def _weight_sums(ep: ExportedProgram, graph: torch.fx.Graph,
                 match: Quantized4bitLinearMatch) -> torch.fx.Node:
    """Each group's sum of the int4 weights per output channel, [groups, N8] int32 (output
    channels padded to 8), a new constant; computed before the weight is packed."""
    dq = match.dequantize
    weight = get_param_tensor(ep, dq.weight_node)
    assert weight is not None and weight.dtype == torch.int8
    sums = weight.to(torch.int32).reshape(dq.rows, -1, match.group_size).sum(dim=2).T
    sums = torch.nn.functional.pad(sums, (0, -sums.shape[1] % 8)).to(torch.int32).contiguous()
    return weight_sums_constant(ep, graph, dq.weight_node, sums)


@register_pattern_replacement("torchao_quantized_linear_4bit")
def replace_quantized_4bit_linear(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                                  match: Quantized4bitLinearMatch) -> None:
    dq = match.dequantize
    constants = (dq.weight_node, dq.scales_node, match.bias_node)
    if not all(n is None or is_param_node(ep, n) for n in constants) \
            or not is_symmetric(ep, dq) or not in_4bit_range(ep, dq.weight_node):
        return
    graph = graph_module.graph
    if match.dynamic.found:
        if get_param_tensor(ep, dq.weight_node).dtype != torch.int8:
            return  # packed by a weight-only sibling: its sums are gone
        sums = _weight_sums(ep, graph, match)
    repack_4bit_weight(ep, dq.weight_node)
    _store_scales_transposed(ep, dq.scales_node)
    if match.bias_node is not None:
        align_width(ep, match.bias_node)
    anchor = match.anchor_node
    if match.dynamic.found:
        target = exir_ops.edge.et_vk.linear_dq8ca_q4gsw.default
        args = (match.pattern_input_node, match.dynamic.scale_node,
                match.dynamic.zero_point_node, dq.weight_node, sums, dq.scales_node,
                match.group_size, match.bias_node)
    else:
        target = exir_ops.edge.et_vk.linear_q4gsw.default
        args = (match.pattern_input_node, dq.weight_node, dq.scales_node, match.group_size,
                match.bias_node)
    with graph.inserting_before(anchor):
        fused = graph.create_node("call_function", target, args=args)
    fused.meta["val"] = anchor.meta["val"]
    anchor.replace_all_uses_with(fused)
