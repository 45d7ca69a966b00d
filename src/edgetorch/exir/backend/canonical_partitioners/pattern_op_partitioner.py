"""``generate_pattern_op_partitions``: the largest subgraphs whose nodes an operator-support
check accepts or a pattern matched -- the usual core of a ``Partitioner.partition``."""

from __future__ import annotations

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase, any_chain
from torch.fx.passes.utils.matcher_utils import SubgraphMatcher

from ....errors import InvalidArgumentError
from .group_partitioner import GroupBasedPartitioner


class _InSet(OperatorSupportBase):
    def __init__(self, nodes: set[torch.fx.Node]) -> None:
        self.nodes = nodes

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:  # type: ignore[no-untyped-def]
        return node in self.nodes


def generate_pattern_op_partitions(
    graph_module: torch.fx.GraphModule,
    patterns: list[torch.fx.Graph] | None = None,
    partitions_list: list[list[torch.fx.Node]] | None = None,
    op_support: OperatorSupportBase | None = None,
    ignore_literals: bool = False,
) -> list[Partition]:
    """Partitions (``.id``, ``.nodes``) of the nodes ``op_support`` accepts, every node of a
    match of one of ``patterns`` (placeholders excluded), and the nodes of
    ``partitions_list``; single-node partitions allowed, no cycles created."""
    chosen: set[torch.fx.Node] = set()
    for pattern in patterns or []:
        for match in SubgraphMatcher(pattern, ignore_literals=ignore_literals).match(
                graph_module.graph):
            chosen.update(n for p, n in match.nodes_map.items()
                          if p.op != "placeholder" and n.op != "placeholder")
    for nodes in partitions_list or []:
        chosen.update(nodes)
    if op_support is None and not chosen and patterns is None and partitions_list is None:
        raise InvalidArgumentError("generate_pattern_op_partitions needs patterns, "
                                   "partitions_list or op_support to choose nodes with")
    support = _InSet(chosen) if op_support is None else any_chain(op_support, _InSet(chosen))
    return CapabilityBasedPartitioner(graph_module, support,
                                      allows_single_node_partition=True).propose_partitions()


def generate_partitions_from_list_of_nodes(
    graph_module: torch.fx.GraphModule,
    pattern_list: list[list[torch.fx.Node]] | None = None,
    op_support: OperatorSupportBase | None = None,
) -> list[Partition]:
    """Partitions of the nodes in ``pattern_list`` and those ``op_support`` accepts."""
    if pattern_list is None and op_support is None:
        raise InvalidArgumentError("generate_partitions_from_list_of_nodes needs pattern_list "
                                   "or op_support to choose nodes with")
    chosen = {n for nodes in pattern_list or [] for n in nodes}
    support = _InSet(chosen) if op_support is None else any_chain(op_support, _InSet(chosen))
    return CapabilityBasedPartitioner(graph_module, support,
                                      allows_single_node_partition=True).propose_partitions()


def generate_grouped_partitions_from_list_of_nodes(
    graph_module: torch.fx.GraphModule,
    pattern_list: list[list[torch.fx.Node]] | None = None,
    op_support: OperatorSupportBase | None = None,
) -> list[Partition]:
    """Like ``generate_partitions_from_list_of_nodes``, but each list of ``pattern_list``
    stays whole: its nodes always land in one partition (``GroupBasedPartitioner``)."""
    if pattern_list is None and op_support is None:
        raise InvalidArgumentError("generate_grouped_partitions_from_list_of_nodes needs "
                                   "pattern_list or op_support to choose nodes with")
    chosen = {n for nodes in pattern_list or [] for n in nodes}
    support = _InSet(chosen) if op_support is None else any_chain(op_support, _InSet(chosen))
    return GroupBasedPartitioner(graph_module, support, node_groups=pattern_list,
                                 allows_single_node_partition=True).propose_partitions()
