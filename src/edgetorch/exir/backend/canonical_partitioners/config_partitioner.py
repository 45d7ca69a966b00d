"""A partitioner driven by per-operator configs (ExecuTorch's
``canonical_partitioners.config_partitioner``).

Each ``PartitionerConfig`` names one operator (``target_name``, without the dialect namespace:
``linear.default``), says whether a node of it can be delegated (``check_constraints``) and which
nodes go with it (``get_partition``: the node and the weights, quantize/dequantize nodes ... it
needs). Node lists that share a node merge into one group; each group then stays whole in one
partition.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

import torch
from torch._export.utils import is_buffer, is_lifted_tensor_constant, is_param
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import Partition

from ....errors import ExportError, InvalidArgumentError
from ..partitioner import TAG, DelegationSpec, Partitioner, PartitionResult
from .pattern_op_partitioner import generate_grouped_partitions_from_list_of_nodes


def is_constant_data(ep: ExportedProgram, node: torch.fx.Node) -> bool:
    return is_param(ep, node) or is_buffer(ep, node) or is_lifted_tensor_constant(ep, node)


def format_target_name(target_name: str) -> str:
    """``aten.linear.default`` -> ``linear.default``: the operator without its dialect
    namespace (a name of two parts or fewer is already that)."""
    names = target_name.split(".")
    if len(names) > 2:
        names.pop(0)
    return ".".join(names)


class PartitionerConfig(ABC):
    """What ``ConfigerationBasedPartitioner`` needs to know about one operator."""

    @property
    @abstractmethod
    def target_name(self) -> str:
        """The operator this config is for, as ``format_target_name`` writes it."""

    @abstractmethod
    def check_constraints(self, node: torch.fx.Node, ep: ExportedProgram) -> bool:
        """Whether ``node`` can be delegated."""

    @abstractmethod
    def get_original_aten(self) -> torch._ops.OpOverload | None:
        """The ATen operator ``to_edge_transform_and_lower`` must keep whole, or None."""

    @abstractmethod
    def get_partition(self, node: torch.fx.Node, ep: ExportedProgram) -> list[torch.fx.Node]:
        """``node`` and the nodes that must be delegated with it ([] when it cannot be)."""


def _groups(node_lists: Iterable[list[torch.fx.Node]]) -> list[list[torch.fx.Node]]:
    """Merge lists that share a node (union-find), in first-seen order."""
    parent: dict[torch.fx.Node, torch.fx.Node] = {}

    def find(x: torch.fx.Node) -> torch.fx.Node:
        root = parent.setdefault(x, x)
        while root is not parent[root]:
            root = parent[root]
        while parent[x] is not root:  # path compression, iteratively
            parent[x], x = root, parent[x]
        return root

    for nodes in node_lists:
        for node in nodes:
            parent[find(node)] = find(nodes[0])
    groups: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    return list(groups.values())


class ConfigerationBasedPartitioner(Partitioner):
    """Partitions from per-operator ``PartitionerConfig``\\ s (ExecuTorch's spelling of the
    class name, kept so its users import it unchanged)."""

    def __init__(self, delegation_spec: DelegationSpec,
                 partitioner_configs: Iterable[PartitionerConfig]) -> None:
        super().__init__()
        self.target_partitioner_configs: dict[str, PartitionerConfig] = {}
        for config in partitioner_configs:
            other = self.target_partitioner_configs.get(config.target_name)
            if other is not None:
                raise InvalidArgumentError(
                    f"PartitionerConfigs {config} and {other} have the same target_name "
                    f"{config.target_name!r}; keep one config per operator")
            self.target_partitioner_configs[config.target_name] = config
        self.delegation_spec = delegation_spec

    def _config(self, node: torch.fx.Node) -> PartitionerConfig | None:
        if node.op != "call_function":
            return None
        name = getattr(node.target, "__name__", None)
        return None if name is None else self.target_partitioner_configs.get(
            format_target_name(name))

    def ops_to_not_decompose(self, ep: ExportedProgram) -> tuple[
            list[torch._ops.OpOverload], Callable[[torch.fx.Node], bool] | None]:
        def filter_fn(node: torch.fx.Node) -> bool:
            config = self._config(node)
            return bool(config is not None and config.get_original_aten()
                        and config.check_constraints(node, ep))

        keep = [c.get_original_aten() for c in self.target_partitioner_configs.values()]
        return [op for op in keep if op is not None], filter_fn

    def get_matched_nodes_from_configs(self, ep: ExportedProgram) -> list[list[torch.fx.Node]]:
        """The groups of nodes the configs accept, overlapping lists merged. A weight already
        in an earlier group is not pulled into another (partitioning copies shared weights)."""
        lists: list[list[torch.fx.Node]] = []
        seen: set[torch.fx.Node] = set()
        for node in ep.graph_module.graph.nodes:
            config = self._config(node)
            if config is None or not config.check_constraints(node, ep):
                continue
            nodes = [n for n in config.get_partition(node, ep)
                     if not (is_constant_data(ep, n) and n in seen)]
            seen.update(nodes)
            if nodes:
                lists.append(nodes)
        return _groups(lists)

    def generate_partitions(self, ep: ExportedProgram) -> list[Partition]:
        return generate_grouped_partitions_from_list_of_nodes(
            ep.graph_module, self.get_matched_nodes_from_configs(ep))

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        partition_tags: dict[str, DelegationSpec] = {}
        for partition in self.generate_partitions(exported_program):
            tag = f"tag{partition.id}"
            for node in partition.nodes:
                if TAG in node.meta:
                    raise ExportError(f"node {node} is in partition {node.meta[TAG]!r} and "
                                      f"in {tag!r}; the configs' node lists overlap")
                node.meta[TAG] = tag
            partition_tags[tag] = self.delegation_spec
        return PartitionResult(tagged_exported_program=exported_program,
                               partition_tags=partition_tags)
