"""A partitioner sending ``aten.add.Tensor`` to the demo backend with a ``target_device``
compile spec: edgetorch's counterpart of ExecuTorch's test ``DeviceAwarePartitioner``
(``exir/backend/test/device_util.py``), same specs, so the two export the same program."""

from __future__ import annotations

from torch.fx.passes.operator_support import OperatorSupportBase, any_chain

from edgetorch.exir.backend.canonical_partitioners.pattern_op_partitioner import (
    generate_pattern_op_partitions,
)
from edgetorch.exir.backend.compile_spec_schema import CompileSpec
from edgetorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from edgetorch.exir.backend.test.backend_with_compiler_demo import BackendWithCompilerDemo
from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY


class _Adds(OperatorSupportBase):
    def is_node_supported(self, submodules, node) -> bool:
        return node.op == "call_function" and node.target == exir_ops.edge.aten.add.Tensor


class DeviceAwarePartitioner(Partitioner):
    def __init__(self, target_device: str | None = "cuda:0") -> None:
        super().__init__()
        specs = [CompileSpec("max_value", bytes([4]))]
        if target_device is not None:
            specs.append(CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, target_device.encode()))
        self.delegation_spec = DelegationSpec(BackendWithCompilerDemo.__name__, specs)

    def partition(self, exported_program) -> PartitionResult:
        tags = {}
        for part in generate_pattern_op_partitions(exported_program.graph_module,
                                                   op_support=any_chain(_Adds())):
            for node in part.nodes:
                node.meta["delegation_tag"] = f"tag{part.id}"
                tags[f"tag{part.id}"] = self.delegation_spec
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
