"""``OpenvinoPartitioner``: hand OpenVINO every operator its PyTorch frontend converts.

Support is OpenVINO's own list (``openvino.frontend.pytorch.torchdynamo.op_support``, keyed
``"torch.ops.aten.add.Tensor"``) plus the Edge dialect's layout ops and ``getitem``, as in
ExecuTorch 1.5.1; partitions are capability-based with single-node partitions allowed, tagged
``tag<partition id>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ...exir.backend import CompileSpec, DelegationSpec, Partitioner, PartitionResult
from ...exir.backend.utils import tag_constant_data
from .options import parse_options
from .preprocess import import_openvino

logger = logging.getLogger(__name__)
aten = torch.ops.aten

EXTRA_SUPPORTED = frozenset({
    "torch.ops.dim_order_ops._clone_dim_order.default",
    "torch.ops.dim_order_ops._to_dim_order_copy.default",
})

# OpenVINO converts these whole; decomposed they would become gathers and index math.
KEEP_WHOLE = (aten.pixel_shuffle.default, aten.upsample_bilinear2d.default,
              aten.upsample_bilinear2d.vec, aten.upsample_nearest2d.default,
              aten.upsample_nearest2d.vec, aten.stack.default)


def op_type(node: torch.fx.Node) -> str:
    """``"aten.add.Tensor"`` for an operator, ``"getitem"`` for ``operator.getitem``: the
    names ``op_types_to_skip`` takes."""
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def openvino_supported_ops() -> frozenset[str]:
    """``"torch.ops.<op_type>"`` names OpenVINO's frontend converts, plus ``EXTRA_SUPPORTED``."""
    import_openvino()
    from openvino.frontend.pytorch.torchdynamo.op_support import OperatorSupport

    return frozenset(OperatorSupport([])._support_dict) | EXTRA_SUPPORTED


class _Support(OperatorSupportBase):
    def __init__(self, partitioner: OpenvinoPartitioner, supported: frozenset[str]) -> None:
        self.partitioner = partitioner
        self.supported = supported

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        reason = self.partitioner._unsupported(node, self.supported)
        if reason is not None:
            self.partitioner.reject(node, reason)
        return reason is None


class OpenvinoPartitioner(Partitioner):
    """ExecuTorch's ``OpenvinoPartitioner(compile_spec, op_types_to_skip, op_names_to_skip)``.

    ``op_types_to_skip`` holds op types (``{"aten.add.Tensor"}``) and ``op_names_to_skip``
    node names to keep out of the delegate. (ExecuTorch 1.5.1 checks them only after an op is
    found supported, so there they never take effect; here they do.)
    """

    def __init__(self, compile_spec: list[CompileSpec] | None = None,
                 op_types_to_skip: set[str] | None = None,
                 op_names_to_skip: set[str] | None = None) -> None:
        super().__init__()
        specs = list(compile_spec if compile_spec is not None else [CompileSpec("device", b"CPU")])
        self.options = parse_options(specs, strict=True)
        self.delegation_spec = DelegationSpec("OpenvinoBackend", specs)
        self._op_types_to_skip = set(op_types_to_skip or ())
        self._op_names_to_skip = set(op_names_to_skip or ())
        self._enabled_by_name: set[str] = set()

    def ops_to_not_decompose(self, ep: ExportedProgram
                             ) -> tuple[list[torch._ops.OpOverload],
                                        Callable[[torch.fx.Node], bool] | None]:
        return (list(KEEP_WHOLE), None)

    def _unsupported(self, node: torch.fx.Node, supported: frozenset[str]) -> str | None:
        if node.op != "call_function":
            return "not an operator call"
        kind = op_type(node)
        if kind in self._op_types_to_skip or node.name in self._op_names_to_skip:
            return "skipped by op_types_to_skip / op_names_to_skip"
        if node.name in self._enabled_by_name or kind == "getitem":
            return None
        if "torch.ops." + kind not in supported:
            return f"OpenVINO's PyTorch frontend does not convert torch.ops.{kind}"
        return None

    def _enable_int4_unpacking(self, gm: torch.fx.GraphModule) -> None:
        """NNCF's int4 weights unpack as ``stack(bitwise_and(w, 15), bitwise_right_shift(w,
        4))`` on a constant; OpenVINO folds that pattern although it does not list the ops."""
        def constant(n: object) -> bool:
            return isinstance(n, torch.fx.Node) and n.op in ("placeholder", "get_attr")

        for node in gm.graph.nodes:
            if node.op != "call_function" or op_type(node) != "aten.stack.default":
                continue
            parts = node.all_input_nodes
            wanted = ("aten.bitwise_and.Scalar", "aten.bitwise_right_shift.Tensor_Scalar")
            if (len(parts) == 2 and tuple(op_type(p) for p in parts) == wanted
                    and all(len(p.all_input_nodes) == 1 and constant(p.all_input_nodes[0])
                            for p in parts)):
                self._enabled_by_name.update([node.name, *(p.name for p in parts)])

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        gm = exported_program.graph_module
        self._enable_int4_unpacking(gm)
        support = _Support(self, openvino_supported_ops())
        partitions = CapabilityBasedPartitioner(
            gm, support, allows_single_node_partition=True).propose_partitions()
        tags = {}
        for partition in partitions:
            tag = f"tag{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
