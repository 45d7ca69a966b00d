"""What torchao's 4-bit weights look like once ``to_edge`` decomposed ``dequantize_affine``
(``IntxWeightOnlyConfig(torch.int4, PerGroup(G))`` and the 8da4w config), and how the Vulkan
delegate stores them. Shared by the quantized embedding and the 4-bit linear patterns.

    q [N, K] int8 -> view [N, K/G, G] -> float -(zero point, viewed and cast)
      * scales viewed [N, K/G, 1] -> view [N, K]

A weight is repacked once (``utils.register_param_mutation``) into the 4-bit linear layout:
two values a byte, the even column + 8 in the low nibble, the odd one + 8 in the high one,
columns padded with zeros to a multiple of 8."""

from __future__ import annotations

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram

from ....errors import PassError
from ....exir.dialects._ops import ops as exir_ops
from ...transforms.utils import get_param_tensor, set_param_tensor
from .. import utils

_A = exir_ops.edge.aten
CASTS = {_A._to_copy.default, exir_ops.edge.dim_order_ops._to_dim_order_copy.default}
VIEWS = {_A.view_copy.default}
LINEAR_WEIGHT_4BIT = "4 bit linear weight"


def _to_placeholder(node: object, through: set, chain: list) -> torch.fx.Node | None:
    """The placeholder ``node`` reads through ops in ``through`` (each added to ``chain``)."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" \
            and node.target in through:
        chain.append(node)
        node = node.args[0]
    return node if isinstance(node, torch.fx.Node) and node.op == "placeholder" else None


class GroupDequantize:
    """A decomposed per-group dequantization ending in ``view`` (its [rows, cols] output):
    ``weight_node``, ``scales_node``, ``zero_point_node`` (or None), ``group_size`` (0 when
    the grouping is not [rows, cols / G, G]) and the nodes it computes (``nodes``); ``found``
    says whether it matched at all."""

    def __init__(self, view: object) -> None:
        self.found, self.nodes, self.group_size = False, [], 0
        if not (isinstance(view, torch.fx.Node) and view.target in VIEWS):
            return
        mul = view.args[0]
        if not (isinstance(mul, torch.fx.Node) and mul.target == _A.mul.Tensor):
            return
        # stable across a tied sibling's repacking: the dequantized weight's own shape
        self.rows, self.cols = view.meta["val"].shape
        for values, scales in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
            if self._match(values, scales):
                self.nodes = [view, mul, *self.nodes]
                grouped = self.values_view.args[1]
                self.group_size = int(grouped[-1]) if len(grouped) == 3 else 0
                self.found = True
                return

    def _match(self, values: object, scales: object) -> bool:
        scale_chain: list = []
        scales_node = _to_placeholder(scales, VIEWS, scale_chain)
        if scales_node is None or not isinstance(values, torch.fx.Node):
            return False
        zero_point, value_chain = None, []
        if values.target == _A.sub.Tensor:
            zp_chain: list = []
            zero_point = _to_placeholder(values.args[1], VIEWS | CASTS, zp_chain)
            if zero_point is None:
                return False
            value_chain += [values, *zp_chain]
            values = values.args[0]
        weight = _to_placeholder(values, VIEWS | CASTS, value_chain)
        views = [n for n in value_chain if n.target in VIEWS and n.args[0] is weight]
        if weight is None or not views or views[0].meta["val"].dtype != torch.int8:
            return False
        self.weight_node, self.scales_node, self.zero_point_node = \
            weight, scales_node, zero_point
        self.values_view = views[0]
        self.nodes = scale_chain + value_chain
        return True

    def groups_tile_rows(self) -> bool:
        return self.group_size > 0 and self.cols % self.group_size == 0


def is_symmetric(ep: ExportedProgram, dq: GroupDequantize) -> bool:
    """The kernels subtract 8 from every nibble: no zero point, or an all-zero one."""
    if dq.zero_point_node is None:
        return True
    zero_point = get_param_tensor(ep, dq.zero_point_node)
    return zero_point is not None and not bool(torch.any(zero_point != 0))


def pack_4bit_linear(values: torch.Tensor) -> torch.Tensor:
    """int8 values in [-8, 7], [rows, cols] -> uint8 [rows, ceil(cols / 8) * 4]: columns
    padded with zeros to a multiple of 8, then the even column + 8 in the low nibble, the
    odd column + 8 in the high one."""
    extra = -values.shape[-1] % 8
    if extra:
        values = torch.nn.functional.pad(values, (0, extra))
    biased = (values.to(torch.int16) + 8).to(torch.uint8)
    return (biased[:, 0::2] | (biased[:, 1::2] << 4)).contiguous()


def replace_param(ep: ExportedProgram, node: torch.fx.Node, value: torch.Tensor) -> None:
    set_param_tensor(ep, node, value)
    mode = detect_fake_mode([node.meta.get("val")])
    node.meta["val"] = mode.from_tensor(value, static_shapes=True) if mode else value


def repack_4bit_weight(ep: ExportedProgram, weight_node: torch.fx.Node) -> None:
    """Pack the int8 weight behind ``weight_node`` into the 4-bit linear layout, once per
    weight however many fused ops read it."""
    if not utils.register_param_mutation(ep, weight_node, LINEAR_WEIGHT_4BIT):
        return
    weight = get_param_tensor(ep, weight_node)
    if weight is None or weight.dtype != torch.int8 or weight.dim() != 2 \
            or int(weight.min()) < -8 or int(weight.max()) > 7:
        raise PassError(f"FusePatternsPass: weight %{weight_node.name} is not int8 in [-8, 7]; "
                        "it cannot be packed as 4-bit")
    replace_param(ep, weight_node, pack_4bit_linear(weight))


def in_4bit_range(ep: ExportedProgram, weight_node: torch.fx.Node) -> bool:
    """The weight is still int8 in [-8, 7], or was packed already (by a tied sibling)."""
    weight = get_param_tensor(ep, weight_node)
    if weight is None:
        return False
    if weight.dtype == torch.uint8:
        return True
    return weight.dtype == torch.int8 and int(weight.min()) >= -8 and int(weight.max()) <= 7
