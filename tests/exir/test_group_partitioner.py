"""``GroupBasedPartitioner``: groups stay together, merging never makes a cycle, single-node
partitions are dropped unless allowed."""

from __future__ import annotations

import operator

import pytest
import torch
from torch.fx.passes.operator_support import OperatorSupportBase

from edgetorch.errors import InvalidArgumentError
from edgetorch.exir.backend.canonical_partitioners.group_partitioner import (
    GroupBasedPartitioner,
)


class _Supported(OperatorSupportBase):
    def __init__(self, targets):
        self.targets = targets

    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and node.target in self.targets


def _gm(fn):
    return torch.fx.symbolic_trace(fn)


def _names(partitions):
    return sorted(sorted(n.name for n in p.nodes) for p in partitions)


def test_unsupported_node_in_the_middle_splits_without_a_cycle():
    # add -> sub (unsupported) -> mul, and add -> mul: one partition {add, mul} would need the
    # value from sub, which needs add: a cycle, so they stay apart.
    def f(x):
        a = torch.add(x, 1)
        b = torch.sub(a, 2)
        return torch.mul(a, b)

    gm = _gm(f)
    support = _Supported({torch.add, torch.mul})
    parts = GroupBasedPartitioner(gm, support, allows_single_node_partition=True)
    assert _names(parts.propose_partitions()) == [["add"], ["mul"]]
    # without single-node partitions nothing is left
    assert GroupBasedPartitioner(gm, support).propose_partitions() == []


def test_a_group_lands_in_one_partition_and_independent_nodes_merge():
    def f(x, y):
        a = torch.add(x, 1)
        m = torch.mul(y, 2)
        return torch.add(a, m), torch.mul(a, 3)

    gm = _gm(f)
    nodes = {n.name: n for n in gm.graph.nodes}
    support = _Supported({torch.add, torch.mul})
    group = [nodes["add"], nodes["mul_1"]]
    parts = GroupBasedPartitioner(gm, support, node_groups=[group]).propose_partitions()
    assert _names(parts) == [["add", "add_1", "mul", "mul_1"]]


def test_getitems_of_a_tuple_join_their_producer():
    def f(x):
        parts = torch.split(torch.relu(x), 2)
        return operator.getitem(parts, 0) + 1

    gm = _gm(f)
    support = _Supported({torch.relu, torch.split, operator.getitem})
    parts = GroupBasedPartitioner(gm, support).propose_partitions()
    assert _names(parts) == [["getitem", "relu", "split"]]


def test_a_node_in_two_groups_is_refused():
    gm = _gm(lambda x: torch.add(x, 1))
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    with pytest.raises(InvalidArgumentError, match="more than one node group"):
        GroupBasedPartitioner(gm, _Supported({torch.add}), node_groups=[[add], [add]])
