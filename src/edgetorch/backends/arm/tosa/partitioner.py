"""``TOSAPartitioner``: tags the quantized subgraphs the TOSA backend takes.

Supported operators (``operator_support.why_not``) are grouped into maximal subgraphs without
cycles, one delegate each, tagged ``tag<partition id>`` as ExecuTorch does. For INT-only
specs the model-boundary quantize/dequantize stay on the CPU: the delegate takes and returns
int8. Every operator left out is reported with its reason (logger
``edgetorch.backends.arm.tosa.partitioner`` at INFO, and ``rejected_nodes_report()``).
"""

from __future__ import annotations

import logging
from collections import Counter

import torch
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ....exir.backend import DelegationSpec, Partitioner, PartitionResult
from ....exir.backend.partitioner import TAG
from ....exir.backend.utils import tag_constant_data
from ..common.arm_compile_spec import ArmCompileSpec
from . import backend as _backend  # noqa: F401  (registers TOSABackend)
from .operator_support import DQ_OPS, Q_OPS, QDQ_OPS, why_not

logger = logging.getLogger(__name__)


class _Supported(OperatorSupportBase):
    def __init__(self, nodes: set[Node]):
        self.nodes = nodes

    def is_node_supported(self, submodules, node: Node) -> bool:
        return node in self.nodes


class TOSAPartitioner(Partitioner):
    """``TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT"), additional_checks=None)``.

    ``additional_checks`` are ``OperatorSupportBase`` objects; a node any of them refuses is
    rejected ("rejected by an additional check").
    """

    backend_id = "TOSABackend"

    def __init__(self, compile_spec: ArmCompileSpec, additional_checks: list | None = None):
        super().__init__()
        self.compile_spec = compile_spec
        self.additional_checks = list(additional_checks or [])
        # ExecuTorch snapshots the compile specs here (see the transform_pipeline_config note
        # in ArmCompileSpec._get_pass_pipeline_config).
        self.delegation_spec = DelegationSpec(self.backend_id, compile_spec._to_list())
        self.rejected: dict[str, tuple[str, str]] = {}

    def _supported_ops(self, ep: ExportedProgram) -> set[Node]:
        spec = self.compile_spec.tosa_spec
        supported: set[Node] = set()
        self.rejected = {}
        for node in ep.graph.nodes:
            if node.op != "call_function" or node.target in QDQ_OPS:
                continue
            reason = why_not(node, ep, spec)
            if reason is None and any(not c.is_node_supported({}, node) for c in self.additional_checks):
                reason = "rejected by an additional check"
            if reason is None:
                supported.add(node)
            else:
                self.rejected[node.name] = (str(node.target), reason)
                self.reject(node, reason)
        return supported

    def _with_qdq(self, ep: ExportedProgram, ops: set[Node]) -> set[Node]:
        """Add the dequantizes feeding and the quantizes following the supported operators.
        The model-boundary ones (a quantize of a model input, a dequantize feeding the
        output) have no supported neighbour on that side, so they stay on the CPU and the
        delegate takes and returns int8, as in ExecuTorch."""
        out = set(ops)
        for node in ep.graph.nodes:
            if node.target in DQ_OPS and node.users and all(u in ops for u in node.users):
                out.add(node)
            elif node.target in Q_OPS and isinstance(node.args[0], Node) and node.args[0] in ops:
                out.add(node)
        return out

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        gm = exported_program.graph_module
        nodes = self._with_qdq(exported_program, self._supported_ops(exported_program))
        partitions = CapabilityBasedPartitioner(
            gm, _Supported(nodes), allows_single_node_partition=True).propose_partitions()
        tags: dict[str, DelegationSpec] = {}
        kept = []
        for partition in partitions:
            if not any(n.target not in QDQ_OPS for n in partition.nodes):
                for n in partition.nodes:  # a lone Q/DQ pair is not worth a delegate
                    self.reject(n, "only quantize/dequantize nodes in this partition")
                continue
            kept.append(partition)
        # Partition ids come from the proposal order (reverse topological, with gaps);
        # ExecuTorch's tags are those ids without gaps: tag0, tag1, ...
        for index, partition in enumerate(sorted(kept, key=lambda p: p.id)):
            tag = f"tag{index}"
            for node in partition.nodes:
                node.meta[TAG] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        if logger.isEnabledFor(logging.INFO):
            logger.info("%s", self.rejected_nodes_report())
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def rejected_nodes_report(self) -> str:
        """A table of the operators left on the CPU and why (empty when all were taken)."""
        if not self.rejected:
            return f"{type(self).__name__}: every operator was delegated"
        counts = Counter(target for target, _ in self.rejected.values())
        lines = [f"{type(self).__name__}: {len(self.rejected)} rejected nodes "
                 f"({', '.join(f'{t} x{c}' for t, c in counts.most_common())})",
                 f"{'node':<40} {'operator':<40} reason"]
        lines += [f"{name:<40} {target:<40} {reason}"
                  for name, (target, reason) in self.rejected.items()]
        return "\n".join(lines)

    def ops_to_not_decompose(self, ep: ExportedProgram):
        """Keep quantized ``linear`` (a 1x1 CONV2D), ``hardswish``, ``hardsigmoid`` and
        ``silu`` (int8 TABLEs) whole, as ExecuTorch does; float ones decompose as usual. A
        linear whose output goes through a ReLU/ReLU6 counts as quantized (fused range)."""
        def quantized(node: Node) -> bool:
            args = node.all_input_nodes
            users = list(node.users)
            out_ok = bool(users) and all("quantize_per_tensor" in str(u.target) for u in users)
            if node.target == torch.ops.aten.linear.default and len(users) == 1 and \
                    users[0].target in (torch.ops.aten.relu.default, torch.ops.aten.hardtanh.default):
                out_ok = True
            return all("dequantize" in str(a.target) for a in args) and out_ok
        aten = torch.ops.aten
        return ([aten.linear.default, aten.hardswish.default, aten.hardsigmoid.default,
                 aten.silu.default], quantized)
