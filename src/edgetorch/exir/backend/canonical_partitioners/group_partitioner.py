"""``GroupBasedPartitioner``: capability-based partitioning in which given groups of nodes
always land in one partition (ExecuTorch's ``canonical_partitioners.group_partitioner``).

The partitions are built as ExecuTorch builds them, so both give the same ones:

1. seeds, walking the graph backwards: every supported node of a group together (the group's
   unsupported nodes are left out), every other supported node alone;
2. greedy merging in seed order: each partition absorbs every later one it can join without a
   cycle (no path leaves the union and comes back into it);
3. ``getitem``\\ s of a node whose users are all ``getitem``\\ s join that node's partition;
4. unless ``allows_single_node_partition``, partitions with at most one compute node go
   (``aten.view`` and ``getitem`` do not count; ``allowed_single_node_partition_ops`` count
   twice).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from torch.fx.graph_module import GraphModule
from torch.fx.node import Node, _get_qualified_name
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import validate_partition

from ....errors import InvalidArgumentError

_NON_COMPUTE = {"torch.ops.aten.view", "_operator.getitem"}


def _downstreams(graph_module: GraphModule) -> dict[Node, set[Node]]:
    """Every node -> the nodes that (transitively) use it."""
    down: dict[Node, set[Node]] = {}
    for node in reversed(graph_module.graph.nodes):
        reach: set[Node] = set()
        for user in node.users:
            reach.add(user)
            reach |= down.get(user, set())
        down[node] = reach
    return down


class GroupBasedPartitioner(CapabilityBasedPartitioner):
    def __init__(self, graph_module: GraphModule, operator_support: OperatorSupportBase,
                 allows_single_node_partition: bool = False,
                 non_compute_ops: Sequence[str] | None = None,
                 allowed_single_node_partition_ops: Sequence[str] | None = None,
                 node_groups: list[list[Node]] | None = None) -> None:
        super().__init__(graph_module=graph_module, operator_support=operator_support,
                         allows_single_node_partition=allows_single_node_partition,
                         non_compute_ops=non_compute_ops,
                         allowed_single_node_partition_ops=allowed_single_node_partition_ops)
        self.node_groups = [set(g) for g in node_groups] if node_groups else []
        self.node_to_group: dict[Node, int] = {}
        for i, group in enumerate(self.node_groups):
            for node in group:
                if node in self.node_to_group:
                    raise InvalidArgumentError(f"node {node} is in more than one node group; "
                                               "a node may belong to one group only")
                self.node_to_group[node] = i
        self._down = _downstreams(graph_module)

    def _can_merge(self, a: Partition, b: Partition) -> bool:
        combined = set(a.nodes) | set(b.nodes)
        for node in combined:
            for user in node.users:
                if user not in combined and self._down[user] & combined:
                    return False
        return validate_partition(list(combined))

    def _seeds(self) -> dict[int, Partition]:
        ids = itertools.count()
        partitions: dict[int, Partition] = {}
        assigned: set[Node] = set()
        for node in reversed(self.graph_module.graph.nodes):
            if node in assigned or not self._is_node_supported(node):
                continue
            if node in self.node_to_group:
                members = [n for n in self.node_groups[self.node_to_group[node]]
                           if self._is_node_supported(n)]
            else:
                members = [node]
            pid = next(ids)
            partitions[pid] = Partition(id=pid, nodes=members)
            assigned.update(members)
        return partitions

    def _merge(self, partitions: dict[int, Partition]) -> None:
        order = list(partitions)
        merged: set[int] = set()
        for i, p1 in enumerate(order):
            if p1 in merged:
                continue
            for p2 in order[i + 1:]:
                if p2 in merged or not self._can_merge(partitions[p1], partitions[p2]):
                    continue
                for node in partitions[p2].nodes:
                    partitions[p1].add_node(node)
                del partitions[p2]
                merged.add(p2)

    def _pull_getitems(self, partitions: dict[int, Partition]) -> None:
        owner = {n: pid for pid, p in partitions.items() for n in p.nodes}
        moves = {}
        for node in self.graph_module.graph.nodes:
            pid = owner.get(node)
            if pid is None or not all(
                    u.op == "call_function" and _get_qualified_name(u.target) == "_operator.getitem"
                    for u in node.users):
                continue
            moves.update({u: pid for u in node.users if u in owner and owner[u] != pid})
        for node, pid in moves.items():
            partitions[owner[node]].remove_node(node)
            partitions[pid].add_node(node)

    def _drop_single_node(self, partitions: dict[int, Partition]) -> None:
        if self.allows_single_node_partition:
            return
        non_compute = _NON_COMPUTE | set(self.non_compute_ops or [])
        allowed = set(self.allowed_single_node_partition_ops or [])
        for pid in list(partitions):
            count = 0
            for node in partitions[pid].nodes:
                if node.op == "call_function":
                    name = _get_qualified_name(node.target)
                    count += (name not in non_compute) + (name in allowed)
            if count <= 1:
                del partitions[pid]

    def propose_partitions(self) -> list[Partition]:
        partitions = self._seeds()
        self._merge(partitions)
        self._pull_getitems(partitions)
        self._drop_single_node(partitions)
        return [p for p in partitions.values() if p.size() > 0]
