"""``from executorch.exir.backend.test.op_partitioner_demo import ...``: the demo partitioners
and operator supports ExecuTorch's backend tests and tutorials use, over edgetorch's demo
backend (``BackendWithCompilerDemo``)."""

from __future__ import annotations

import itertools

import torch
from torch._export.utils import is_buffer, is_lifted_tensor_constant, is_param
from torch.export import ExportedProgram
from torch.fx.passes.operator_support import OperatorSupportBase

from ....backends.demo.compiler import (
    AddMulPartitionerDemo,
    BackendWithCompilerDemo,
    ExecutorBackend,
)
from ...dialects._ops import ops as exir_ops
from ...graph_module import get_control_flow_submodules
from ..canonical_partitioners.pattern_op_partitioner import generate_pattern_op_partitions
from ..compile_spec_schema import CompileSpec
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
        return _tag_with_weights(self, edge_exported_program)


def _tag_with_weights(partitioner: Partitioner, ep: ExportedProgram) -> PartitionResult:
    """Tag each partition of ``partitioner.op_support`` with the weights, buffers and
    constants its nodes read (so the delegate owns them rather than taking them as inputs)."""
    tags = {}
    for partition in generate_pattern_op_partitions(ep.graph_module,
                                                    op_support=partitioner.op_support):
        tag = f"tag{partition.id}"
        tags[tag] = partitioner.delegation_spec
        for node in partition.nodes:
            node.meta[TAG] = tag
            for arg in node.args:
                if isinstance(arg, torch.fx.Node) and _is_weight(ep, arg):
                    arg.meta[TAG] = tag
    return PartitionResult(tagged_exported_program=ep, partition_tags=tags)


class AllNodesPartitionerDemo(Partitioner):
    """Delegates every operator (with the weights it reads) to ``ExecutorBackend``, which
    runs each partition as a nested program."""

    def __init__(self) -> None:
        super().__init__()
        self.op_support = AllOperatorSupport()
        self.delegation_spec = DelegationSpec(ExecutorBackend.__name__, [])

    def partition(self, edge_exported_program: ExportedProgram) -> PartitionResult:
        return _tag_with_weights(self, edge_exported_program)


aten = torch.ops.aten
# Kept whole through to_edge_transform_and_lower, each delegated alone (the demo backend runs
# them as single ops).
ops_not_to_decompose = [aten.linear.default, aten.scaled_dot_product_attention.default,
                        aten.upsample_nearest2d.vec]
edge_ops_non_decomposed = [exir_ops.edge.aten.linear.default,
                           exir_ops.edge.aten.scaled_dot_product_attention.default,
                           exir_ops.edge.aten.upsample_nearest2d.vec]


class OpsToNotDecomposeOperatorSupport(OperatorSupportBase):
    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.target in edge_ops_non_decomposed


class NonDecompTestPartitioner(Partitioner):
    """Keeps linear (with a bias), scaled_dot_product_attention and upsample_nearest2d from
    decomposition and delegates each such node alone (also inside control flow) to the demo
    backend with ``max_value=4``."""

    def __init__(self) -> None:
        super().__init__()
        self.supported_non_decomposed_edge_ops = edge_ops_non_decomposed
        self.op_support = OpsToNotDecomposeOperatorSupport()
        self.delegation_spec = DelegationSpec(BackendWithCompilerDemo.__name__,
                                              [CompileSpec("max_value", bytes([4]))])

    def ops_to_not_decompose(self, ep: ExportedProgram):
        def keep(node: torch.fx.Node) -> bool:
            # linear without a bias decomposes (the demo partitioner only takes biased ones)
            return node.target != aten.linear.default or len(node.args) == 3

        return list(ops_not_to_decompose), keep

    def _tag(self, gm: torch.fx.GraphModule, ids: itertools.count) -> dict[str, DelegationSpec]:
        tags = {}
        for node in gm.graph.nodes:
            if self.op_support.is_node_supported(None, node):
                tag = f"tag{next(ids)}"
                node.meta[TAG] = tag
                tags[tag] = self.delegation_spec
        for _, submodule, _ in get_control_flow_submodules(gm):
            tags.update(self._tag(submodule, ids))
        return tags

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        tags = self._tag(exported_program.graph_module, itertools.count())
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)


__all__ = ["AddAttributePartitionerDemo", "AddMulPartitionerDemo", "AddOperatorSupport",
           "AllNodesPartitionerDemo",
           "AllOperatorSupport", "MatmulOperatorSupport", "NonDecompTestPartitioner",
           "OpsToNotDecomposeOperatorSupport"]
