"""``AllNodePartitioner``: the whole program to one backend (every operator call, every
weight, buffer and lifted constant; user inputs stay the delegate's inputs)."""

from __future__ import annotations

import torch
from torch._export.utils import is_buffer, is_lifted_tensor_constant, is_param
from torch.export import ExportedProgram

from ..compile_spec_schema import CompileSpec
from ..partitioner import TAG, DelegationSpec, Partitioner, PartitionResult


def is_non_tensor_placeholder(node: torch.fx.Node, ep: ExportedProgram) -> bool:
    """A placeholder that is not a weight, buffer or lifted constant (a user input)."""
    return node.op == "placeholder" and not (
        is_param(ep, node) or is_buffer(ep, node) or is_lifted_tensor_constant(ep, node))


class AllNodePartitioner(Partitioner):
    def __init__(self, backend_id: str, compile_specs: list[CompileSpec]) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec(backend_id, compile_specs)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        tag = self.delegation_spec.backend_id
        tags: dict[str, DelegationSpec] = {}
        for node in exported_program.graph_module.graph.nodes:
            if node.op == "output" or is_non_tensor_placeholder(node, exported_program):
                continue
            node.meta[TAG] = tag
            tags[tag] = self.delegation_spec
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
