"""``TOSAPartitioner``: tags the quantized subgraphs the TOSA backend takes.

Operators the TOSA profile takes (``operator_support.why_not``) and edgetorch's lowering has a
rule for are grouped into maximal subgraphs without cycles, one delegate each, tagged
``tag<partition id>`` as ExecuTorch does. Then each proposed partition is lowered for real
(``lower_to_tosa``, the code ``preprocess`` runs): a node the lowering refuses leaves the
partition with the lowering's reason and the partitions are proposed again, so what is
delegated is exactly what the lowering can do, and export never fails on an operator --
it stays on the CPU. For INT-only specs the model-boundary quantize/dequantize stay on the
CPU: the delegate takes and returns int8. Every operator left out is reported with its
reason (logger ``edgetorch.backends.arm.tosa.partitioner`` at INFO, and
``rejected_nodes_report()``).
"""

from __future__ import annotations

import logging
import operator
from collections import Counter

import torch
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ....errors import LoweringRefusedError, PassError
from ....exir.backend import DelegationSpec, Partitioner, PartitionResult
from ....exir.backend.partitioner import TAG
from ....exir.backend.subgraph import tagged_program
from ....exir.backend.utils import tag_constant_data
from ..common.arm_compile_spec import ArmCompileSpec
from . import backend as _backend  # noqa: F401  (registers TOSABackend)
from .lowering import has_rule, lower_to_tosa
from .operator_support import DQ_OPS, Q_OPS, QDQ_OPS, why_not

logger = logging.getLogger(__name__)


NO_COMPUTE = ("Partition contained only ops which are removed in the TOSA lowering, leading to "
              "an empty partition.")


def _no_compute(node: Node) -> bool:
    """Operators that move no data in TOSA (ExecuTorch's ``_is_noop_*`` and view_copy): a
    partition of these alone is not delegated, as in ExecuTorch."""
    name = str(node.target)
    if name in ("aten.view_copy.default", "aten.alias_copy.default", "aten.detach_copy.default",
                "aten.clone.default", "dim_order_ops._clone_dim_order.default"):
        return True
    val, src = node.meta.get("val"), node.args[0] if node.args else None
    src_val = src.meta.get("val") if isinstance(src, Node) else None
    if not (isinstance(val, torch.Tensor) and isinstance(src_val, torch.Tensor)):
        return False
    if name in ("aten.expand_copy.default", "aten.squeeze_copy.dims"):
        return tuple(val.shape) == tuple(src_val.shape)
    if name == "dim_order_ops._to_dim_order_copy.default":
        return val.dtype == src_val.dtype
    if name == "aten.flip.default":
        return len(node.args[1]) == 0
    if name == "aten.permute_copy.default":
        rank = len(node.args[1])
        return [d % rank for d in node.args[1]] == list(range(rank))
    return False


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
            if reason is None and not has_rule(node, spec):
                reason = (f"{node.target} is in ExecuTorch's TOSA profile but edgetorch's TOSA "
                          "lowering has no rule for it yet; it runs on the CPU")
            if reason is None and any(not c.is_node_supported({}, node) for c in self.additional_checks):
                reason = "rejected by an additional check"
            if reason is None:
                supported.add(node)
            else:
                self.rejected[node.name] = (str(node.target), reason)
                self.reject(node, reason)
        return supported

    def _drop(self, ops: set[Node], node: Node, reason: str) -> bool:
        """Leave ``node`` (and the getitems reading it) on the CPU. A quantize/dequantize the
        lowering refused stands for the operator it belongs to. False if nothing changed."""
        if node.target in Q_OPS and isinstance(node.args[0], Node):
            node = node.args[0]
        elif node.target in DQ_OPS:
            users = [u for u in node.users if u in ops]
            return any([self._drop(ops, u, reason) for u in users])
        if node not in ops:
            return False
        ops.discard(node)
        self.rejected[node.name] = (str(node.target), reason)
        self.reject(node, reason)
        for user in node.users:
            if user.target is operator.getitem:
                self._drop(ops, user, f"reads an output of %{node.name}, which stays on the CPU")
        return True

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

    def _propose(self, ep: ExportedProgram, ops: set[Node]) -> list:
        """Maximal acyclic partitions of ``ops`` (with their Q/DQ), sorted by id; partitions
        of Q/DQ nodes alone are not worth a delegate."""
        nodes = self._with_qdq(ep, ops)
        partitions = CapabilityBasedPartitioner(
            ep.graph_module, _Supported(nodes),
            allows_single_node_partition=True).propose_partitions()
        kept = []
        for p in sorted(partitions, key=lambda p: p.id):
            if all(n.target in QDQ_OPS or _no_compute(n) for n in p.nodes):
                for n in p.nodes:
                    if n.target not in QDQ_OPS:
                        self.rejected[n.name] = (str(n.target), NO_COMPUTE)
                        self.reject(n, NO_COMPUTE)
                continue
            kept.append(p)
        return kept

    def _tag(self, ep: ExportedProgram, partitions: list) -> dict[str, DelegationSpec]:
        # Partition ids come from the proposal order (reverse topological, with gaps);
        # ExecuTorch's tags are those ids without gaps: tag0, tag1, ...
        for node in ep.graph_module.graph.nodes:
            node.meta.pop(TAG, None)
        tags: dict[str, DelegationSpec] = {}
        for index, partition in enumerate(partitions):
            tag = f"tag{index}"
            for node in partition.nodes:
                node.meta[TAG] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(ep)
        return tags

    def _refused(self, ep: ExportedProgram, partitions: list,
                 tags: dict[str, DelegationSpec]) -> dict[Node, str]:
        """Lower each proposed partition as ``preprocess`` will; the nodes it refuses, with
        the lowering's reason (all of a partition's operators when no single node is
        named)."""
        refused: dict[Node, str] = {}
        for partition, tag in zip(partitions, tags):
            program = tagged_program(ep, tag)
            if program is None:
                continue
            try:
                lower_to_tosa(program, self.compile_spec.tosa_spec)
            except LoweringRefusedError as e:
                by_name = {n.name: n for n in partition.nodes}
                if e.node in by_name:
                    refused[by_name[e.node]] = e.args[0]
                else:
                    refused.update((n, f"its partition cannot be lowered: {e.args[0]}")
                                   for n in partition.nodes if n.target not in QDQ_OPS)
        return refused

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        ops = self._supported_ops(exported_program)
        for node in [n for n in ops if n.target is operator.getitem]:
            if node.args[0] not in ops:  # CapabilityBasedPartitioner keeps it with its source
                self._drop(ops, node, f"reads an output of %{node.args[0].name}, which stays "
                                      "on the CPU")
        while True:  # each round removes at least one node: bounded by the graph's size
            partitions = self._propose(exported_program, ops)
            tags = self._tag(exported_program, partitions)
            refused = self._refused(exported_program, partitions, tags)
            if not refused:
                break
            if not any([self._drop(ops, node, why) for node, why in refused.items()]):
                raise PassError(f"{type(self).__name__}: the TOSA lowering refused "
                                f"{sorted(n.name for n in refused)} but none of them can be left "
                                "out of a partition; please report this bug")
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
        ``silu`` (int8 TABLEs) whole, as ExecuTorch does; float ones decompose as usual, but
        for a spec with the FP profile, where every ``linear`` stays whole. A
        linear whose output goes through a ReLU/ReLU6 counts as quantized (fused range).
        Asked again after partitioning, the filter declines the nodes this partitioner left
        on the CPU, so they are decomposed for the portable kernels."""
        fp = self.compile_spec.tosa_spec.support_float()

        def quantized(node: Node) -> bool:
            if node.name in self.rejected:
                return False
            if fp and node.target == torch.ops.aten.linear.default:
                return True  # a CONV2D under the FP profile too (ExecuTorch's if_fp set)
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
