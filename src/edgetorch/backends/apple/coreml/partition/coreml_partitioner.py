"""``CoreMLPartitioner``: hand Core ML every operator coremltools converts (ExecuTorch 1.5.1's
partitioner).

Support is coremltools' own (``is_torch_fx_node_supported``), minus what is known to fail
(add/sub with alpha != 1, diagonal, acosh/asinh, rand, argmin/argmax over the flattened
input) and the user's ``skip_ops_for_coreml_delegation``; partitions are capability-based,
single nodes allowed, tagged ``tag<id>``. Weights go with their partition, mutable buffers
too (as Core ML state, iOS 18+) unless ``take_over_mutable_buffer=False``. With
``lower_full_graph=True`` an unsupported operator is an error instead of a split.
``ops_to_not_decompose`` keeps whole every supported operator (not views, triu/tril or
repeat_interleave), so Core ML gets SDPA and friends undecomposed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch.export import ExportedProgram
from torch.fx.passes.operator_support import OperatorSupportBase

from .....exir.backend import CompileSpec, DelegationSpec, Partitioner, PartitionResult
from .....exir.backend.utils import (
    tag_capability_partitions,
    tag_constant_data,
    tag_mutated_buffer,
)
from ..compiler import CoreMLBackend
from ..compiler.coreml_preprocess import COMPILE_SPEC_KEYS

logger = logging.getLogger(__name__)
aten = torch.ops.aten

# By upstream issue: diagonal (coremltools#2565, wrong results), acosh/asinh (#2569, not
# implemented), rand (executorch#11722, fails in coremltools 9.0). Edge ops compare equal.
_UNSUPPORTED_OP_TARGETS = frozenset({aten.diagonal.default, aten.diagonal_copy.default,
                                     aten.acosh.default, aten.asinh.default, aten.rand.default})
_ARG_MIN_MAX = (aten.argmax.default, aten.argmin.default)
_NOT_KEPT_WHOLE = (aten.triu.default, aten.tril.default,  # blocked in the ExecuTorch namespace
                   aten.repeat_interleave.self_int,  # slow once converted
                   aten.repeat_interleave.self_Tensor)


def _is_view_op(op: torch._ops.OpOverload) -> bool:
    args = op._schema.arguments
    return bool(args) and args[0].alias_info is not None and not args[0].alias_info.is_write


class _OperatorsSupportedForCoreMLBackend(OperatorSupportBase):
    def __init__(self, skip_ops_for_coreml_delegation: list[str] | None = None,
                 lower_full_graph: bool = False, log: bool = False) -> None:
        super().__init__()
        self.skip_ops_for_coreml_delegation = skip_ops_for_coreml_delegation or []
        self.lower_full_graph = lower_full_graph
        self._logged: set[str] = set()
        self._log = log

    def log_once(self, msg: str) -> None:
        if self._log and msg not in self._logged:
            logger.info(msg)
            self._logged.add(msg)

    def should_skip_op_for_delegation(self, name: str) -> bool:
        if name not in self.skip_ops_for_coreml_delegation:
            return False
        assert not self.lower_full_graph, (
            f"Cannot skip {name} because lower_full_graph is True.  Please set "
            "skip_ops_for_coreml_delegation=None or lower_full_graph=False in the "
            "CoreMLPartitioner")
        self.log_once("Skipping op for CoreML delegation because it is in "
                      f"skip_ops_for_coreml_delegation: {name}")
        return True

    def should_override_support(self, node: torch.fx.Node) -> bool:
        """Known failures coremltools nonetheless claims to convert."""
        if node.target in (aten.sub.Tensor, aten.add.Tensor) and \
                node.kwargs.get("alpha", 1) != 1:  # coremltools#2573
            self.log_once("torch.ops.aten.{sub, add}.Tensor with alpha != 1 is not supported by "
                          "CoreML.  Overriding support.")
            return True
        if node.target in _UNSUPPORTED_OP_TARGETS:
            self.log_once(f"{node.target} is not supported by CoreML.  Overriding op support.")
            return True
        if node.target in _ARG_MIN_MAX:  # dim=None: executorch#11715, crashes at run time
            dim = node.args[1] if len(node.args) >= 2 else node.kwargs.get("dim")
            if dim is None:
                self.log_once("torch.ops.aten.{argmax, argmin}.default with dim=None is not "
                              "supported by CoreML.  Overriding op support.")
                return True
        return False

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        import coremltools as ct

        if node.op == "get_attr":
            return True
        if node.op != "call_function":  # placeholders and outputs are never tagged
            self.log_once("Skipping op for CoreML delegation because it is not get_attr or "
                          f"call_function: {node.op}")
            return False
        name = getattr(node.target, "__name__", "").lower()
        if self.should_skip_op_for_delegation(name):
            return False
        ok = ct.converters.mil.frontend.torch.is_torch_fx_node_supported(node)
        if self.should_override_support(node):
            ok = False
        if not ok:
            if self.lower_full_graph:
                raise NotImplementedError(
                    f"CoreML does not support the op {name}, but you have set "
                    "lower_full_graph=True in the CoreMLPartitioner. Set lower_full_graph=False "
                    "to run unsupported ops outside Core ML, or rewrite the model without it.")
            self.log_once("Skipping op for CoreML delegation because it is not supported by "
                          f"CoreML: {name}")
        return ok


NAME_KEY = "coreml_executorch_name"


def record_executorch_names(graph: torch.fx.Graph) -> None:
    """Give each node, in ``meta[NAME_KEY]``, the name ExecuTorch's Edge graph has for it.

    Core ML names its values after the graph's nodes (a delegate's output names too), and
    ExecuTorch's Edge graphs are re-traced: every operator node is named after its target
    (``aten_add_tensor``, ``aten_add_tensor_1``...) in graph order, as torch.fx names new
    nodes. Creating the same nodes in a scratch graph gives exactly those names; the
    preprocess renames its subgraph with them.
    """
    scratch = torch.fx.Graph()
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            name = scratch.create_node(node.op, node.target, name=node.name).name
        else:
            name = scratch.create_node(node.op, node.target).name
        node.meta[NAME_KEY] = name


class CoreMLPartitioner(Partitioner):
    def __init__(self, *, skip_ops_for_coreml_delegation: list[str] | None = None,
                 compile_specs: list[CompileSpec] | None = None,
                 take_over_mutable_buffer: bool | None = True, lower_full_graph: bool = False,
                 take_over_constant_data: bool = True) -> None:
        super().__init__()
        self.skip_ops_for_coreml_delegation = skip_ops_for_coreml_delegation or []
        for spec in compile_specs or []:
            if spec.key == COMPILE_SPEC_KEYS.ENUMERATED_SHAPES.value:
                assert lower_full_graph, ("lower_full_graph must be True in the "
                                          "CoreMLPartitioner when using an enumerated shape "
                                          "compile spec")
        self.delegation_spec = DelegationSpec(CoreMLBackend.__name__, compile_specs or [])
        self.take_over_mutable_buffer = take_over_mutable_buffer
        self.lower_full_graph = lower_full_graph
        self.take_over_constant_data = take_over_constant_data
        if lower_full_graph:
            assert not self.skip_ops_for_coreml_delegation, \
                "When lower_full_graph=True, you cannot set skip_ops_for_coreml_delegation"
            assert take_over_constant_data, \
                "When lower_full_graph=True, you must set take_over_constant_data=True"
            assert take_over_mutable_buffer, \
                "When lower_full_graph=True, you must set take_over_mutable_buffer=True"

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        record_executorch_names(exported_program.graph)
        support = _OperatorsSupportedForCoreMLBackend(self.skip_ops_for_coreml_delegation,
                                                      self.lower_full_graph, log=True)
        tags = tag_capability_partitions(exported_program.graph_module, support,
                                         self.delegation_spec)
        if self.take_over_constant_data:
            tag_constant_data(exported_program)
        if self.take_over_mutable_buffer:
            logger.info("Core ML partitioner will take over torch mutable buffer as Core ML "
                        "state (needs macOS 15 / iOS 18); pass take_over_mutable_buffer=False "
                        "for older systems")
            tag_mutated_buffer(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def ops_to_not_decompose(
            self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Callable[[torch.fx.Node], bool] | None]:
        support = _OperatorsSupportedForCoreMLBackend(self.skip_ops_for_coreml_delegation,
                                                      self.lower_full_graph, log=False)
        keep = []
        for node in ep.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            try:
                if support.is_node_supported(None, node) and \
                        node.target not in _NOT_KEPT_WHOLE and not _is_view_op(node.target):
                    keep.append(node.target)
            except Exception as e:  # coremltools raises for some unsupported ops
                logger.info(f"Encountered exception when checking node support, treating node "
                            f"as unsupported: {e}")
        return keep, None
