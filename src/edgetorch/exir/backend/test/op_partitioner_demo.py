"""``from executorch.exir.backend.test.op_partitioner_demo import ...``: the demo partitioners
and operator supports ExecuTorch's backend tests and tutorials use, over edgetorch's demo
backend (``BackendWithCompilerDemo``)."""

from __future__ import annotations

import torch
from torch._export.utils import is_buffer, is_lifted_tensor_constant, is_param
from torch.export import ExportedProgram
from torch.fx.passes.operator_support import OperatorSupportBase

from ....backends.demo.compiler import AddMulPartitionerDemo, BackendWithCompilerDemo
from ...dialects._ops import ops as exir_ops
from ..canonical_partitioners.pattern_op_partitioner import generate_pattern_op_partitions
from ..partitioner import TAG, DelegationSpec, Partitioner, PartitionResult


class AllOperatorSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function"


class AddOperatorSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.target == exir_ops.edge.aten.add.Tensor


class MatmulOperatorSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.target == exir_ops.edge.aten.mm.default


def _is_weight(ep: ExportedProgram, node: torch.fx.Node) -> bool:
    return node.op == "get_attr" or node.op == "placeholder" and (
        is_param(ep, node) or is_buffer(ep, node) or is_lifted_tensor_constant(ep, node))


class AddAttributePartitionerDemo(Partitioner):
    """Delegates every ``add.Tensor`` together with the weights, buffers and constants it
    reads (so they are owned by the delegate rather than passed in)."""

    def __init__(self) -> None:
        super().__init__()
        self.op_support = AddOperatorSupport()
        self.delegation_spec = DelegationSpec(BackendWithCompilerDemo.__name__, [])

    def partition(self, edge_exported_program: ExportedProgram) -> PartitionResult:
        tags = {}
        for partition in generate_pattern_op_partitions(edge_exported_program.graph_module,
                                                        op_support=self.op_support):
            tag = f"tag{partition.id}"
            tags[tag] = self.delegation_spec
            for node in partition.nodes:
                node.meta[TAG] = tag
                for arg in node.args:
                    if isinstance(arg, torch.fx.Node) and _is_weight(edge_exported_program, arg):
                        arg.meta[TAG] = tag
        return PartitionResult(tagged_exported_program=edge_exported_program,
                               partition_tags=tags)


__all__ = ["AddAttributePartitionerDemo", "AddMulPartitionerDemo", "AddOperatorSupport",
           "AllOperatorSupport", "MatmulOperatorSupport"]
