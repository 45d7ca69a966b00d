"""``ReplaceOpsWithChannelsLastVariants`` (ExecuTorch's name): contiguous (NCHW) Edge operators
become their ``channels_last`` dialect variants, with data-moving permutes around them, so a
layout pass or a backend sees channels-last regions explicitly while the rest of the graph
keeps its contiguous layout."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.fx.node import Target

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult
from . import channels_last_ops  # noqa: F401  (defines the dialect's operators)

FilterFnType = Callable[[torch.fx.Node], bool]

_NCHW_TO_NHWC_PERM = [0, 2, 3, 1]
_NHWC_TO_NCHW_PERM = [0, 3, 1, 2]
_CL, _A = exir_ops.edge.channels_last, exir_ops.edge.aten


@dataclass
class ChannelsLastOpSpec:
    """How one contiguous operator becomes ``target`` (a ``channels_last`` operator): which
    of its arguments are permuted to NHWC, which of its results are permuted back, and which
    nodes qualify (``filter_fn``; None: all)."""

    target: Target
    input_indices: list[int]
    output_indices: list[int]
    filter_fn: FilterFnType | None = None


def _first_val(node: torch.fx.Node) -> torch.Tensor:
    val = node.meta["val"]
    return val[0] if isinstance(val, (list, tuple)) else val


def _requires_rank(ranks: list[int]) -> FilterFnType:
    return lambda node: _first_val(node).dim() in ranks


def _conv2d(node: torch.fx.Node) -> bool:
    """A 2-D convolution (its weight has 4 dims), of a 3-D or 4-D input."""
    weight = node.args[1]
    return (_first_val(node).dim() in (3, 4) and isinstance(weight, torch.fx.Node)
            and weight.meta["val"].dim() == 4)


def _spec(target: Target, ranks: list[int], outputs: list[int] | None = None) -> ChannelsLastOpSpec:
    return ChannelsLastOpSpec(target, [0], outputs or [0], _requires_rank(ranks))


_DEFAULT_OP_MAP: dict[Target, ChannelsLastOpSpec] = {
    _A._adaptive_avg_pool2d.default: _spec(_CL.adaptive_avg_pool2d.default, [3, 4]),
    _A.avg_pool2d.default: _spec(_CL.avg_pool2d.default, [3, 4]),
    _A.convolution.default: ChannelsLastOpSpec(_CL.convolution.default, [0], [0], _conv2d),
    _A.grid_sampler_2d.default: _spec(_CL.grid_sampler_2d.default, [4]),
    _A.max_pool2d_with_indices.default: _spec(_CL.max_pool2d_with_indices.default, [3, 4],
                                              [0, 1]),
    _A.max_pool2d.default: _spec(_CL.max_pool2d.default, [3, 4]),
    _A.upsample_bilinear2d.vec: _spec(_CL.upsample_bilinear2d.default, [4]),
    _A.upsample_nearest2d.vec: _spec(_CL.upsample_nearest2d.default, [4]),
}


class ReplaceOpsWithChannelsLastVariants(ExportPass):
    """Replace each operator of ``op_map`` (default: every operator the dialect has) whose
    result is contiguous by its ``channels_last`` variant between permutes. A 3-D (unbatched)
    activation gets a batch dimension for the variant and loses it after.

    The replaced node's metadata stays on the variant (provenance, backend annotations); the
    shapes are recomputed by the retrace. Metadata tied to a permuted dimension (a per-channel
    axis) is the caller's to remap."""

    def __init__(self, exported_program: ExportedProgram,
                 op_map: dict[Target, ChannelsLastOpSpec] | None = None) -> None:
        super().__init__()
        self.exported_program = exported_program
        self.op_map = dict(_DEFAULT_OP_MAP) if op_map is None else op_map

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            spec = self.op_map.get(node.target) if node.op == "call_function" else None
            if spec is None or not self._qualifies(node, spec):
                continue
            self._replace(graph, node, spec)
            modified = True
        if modified:
            graph.eliminate_dead_code()
            graph_module.recompile()
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)

    @staticmethod
    def _qualifies(node: torch.fx.Node, spec: ChannelsLastOpSpec) -> bool:
        val = _first_val(node)
        if val.dim_order() != tuple(range(val.dim())):
            return False
        return spec.filter_fn is None or spec.filter_fn(node)

    def _replace(self, graph: torch.fx.Graph, node: torch.fx.Node,
                 spec: ChannelsLastOpSpec) -> None:
        unbatched = _first_val(node).dim() == 3
        args = list(node.args)
        with graph.inserting_before(node):
            for i in spec.input_indices:
                if unbatched:
                    args[i] = _new(graph, _A.unsqueeze_copy.default, (args[i], 0))
                args[i] = _new(graph, _CL.permute_copy.default, (args[i], _NCHW_TO_NHWC_PERM))
            variant = graph.create_node("call_function", spec.target, tuple(args), node.kwargs)
            variant.meta = dict(node.meta)
            users = list(node.users)
            if users and all(u.target is operator.getitem for u in users):
                for i in spec.output_indices:
                    readers = [u for u in users if u.args[1] == i]
                    if readers:
                        item = _new(graph, operator.getitem, (variant, i))
                        _restore_layout(graph, item, readers, unbatched)
            else:
                if spec.output_indices != [0]:
                    raise ValueError(f"output_indices {spec.output_indices} of the spec for "
                                     f"{spec.target}: a single-result operator has only 0")
                _restore_layout(graph, variant, [node], unbatched)
        graph.erase_node(node)


def _new(graph: torch.fx.Graph, target: Target, args: tuple) -> torch.fx.Node:
    node = graph.create_node("call_function", target, args)
    node.meta = {}  # the retrace computes its value
    return node


def _restore_layout(graph: torch.fx.Graph, nhwc: torch.fx.Node,
                    readers: list[torch.fx.Node], unbatched: bool) -> None:
    """Permute ``nhwc`` back to NCHW (dropping the added batch) for what read ``readers``,
    and remove the readers that were getitems of the replaced node."""
    out = _new(graph, _CL.permute_copy.default, (nhwc, _NHWC_TO_NCHW_PERM))
    if unbatched:
        out = _new(graph, _A.squeeze_copy.dims, (out, [0]))
    for reader in readers:
        reader.replace_all_uses_with(out)
        if reader.target is operator.getitem:
            graph.erase_node(reader)
