"""Compiler half of the demo backend: a partitioner and ``preprocess`` to a JSON program."""

from __future__ import annotations

import base64
import json

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ...exir.backend import (
    BackendDetails,
    CompileSpec,
    DelegationSpec,
    Partitioner,
    PartitionResult,
    PreprocessResult,
)
from ...exir.backend.utils import tag_constant_data
from .runtime import BACKEND_ID, OPS, VERSION

aten = torch.ops.aten
SUPPORTED_OPS = {getattr(getattr(aten, name.split(".")[1]), name.split(".")[2]) for name in OPS}


def _op_key(op: torch._ops.OpOverload) -> str:
    return f"{op.namespace}.{op._schema.name.split('::')[1]}.{op._overloadname}"


class BackendWithCompilerDemo(BackendDetails):
    """Compiles a subgraph of ``SUPPORTED_OPS`` on float32 tensors to a JSON program."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        sig = edge_program.graph_signature
        weights = {s.arg.name: s.target for s in sig.input_specs if s.kind != InputKind.USER_INPUT}
        inputs, constants, instructions, debug_map = [], {}, [], {}
        for node in edge_program.graph.nodes:
            if node.op == "placeholder":
                if node.name in weights:
                    target = weights[node.name]
                    value = edge_program.state_dict.get(target, edge_program.constants.get(target))
                    constants[node.name] = _encode(value)
                else:
                    inputs.append(node.name)
            elif node.op == "call_function":
                if node.target not in SUPPORTED_OPS:
                    raise RuntimeError(f"{node.target} is not supported in {BACKEND_ID}; "
                                       f"it runs {sorted(OPS)}")
                instruction = {
                    "op": _op_key(node.target),
                    "args": [_arg(a) for a in node.args],
                    "out": node.name,
                    "dtype": str(node.meta["val"].dtype).removeprefix("torch."),
                }
                if node.kwargs:
                    instruction["kwargs"] = {k: _arg(a) for k, a in node.kwargs.items()}
                instructions.append(instruction)
                if node.meta.get("debug_handle") is not None:
                    # ExecuTorch's demo keys its map by the handle itself (its instructions
                    # report the node's handle as their delegate debug identifier).
                    debug_map[node.meta["debug_handle"]] = (node.meta["debug_handle"],)
            elif node.op == "output":
                outputs = [a.name for a in node.args[0]]
        program = {"version": VERSION, "inputs": inputs, "outputs": outputs,
                   "constants": constants, "instructions": instructions}
        blob = json.dumps(program, separators=(",", ":")).encode("utf-8")
        return PreprocessResult(processed_bytes=blob, debug_handle_map=debug_map)


def _arg(a: object) -> object:
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if a is None or isinstance(a, (bool, int, float)):
        return a
    if isinstance(a, (list, tuple)) and all(isinstance(i, (bool, int, float)) for i in a):
        return list(a)
    raise RuntimeError(f"{BACKEND_ID} cannot encode argument {a!r}")


def _encode(t: torch.Tensor) -> dict:
    t = t.detach().contiguous()
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "data": base64.b64encode(t.numpy().tobytes()).decode("ascii")}


class _Support(OperatorSupportBase):
    def __init__(self, partitioner: DemoPartitioner) -> None:
        self.partitioner = partitioner

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        reason = _unsupported(node, self.partitioner.ops)
        if reason is not None:
            self.partitioner.reject(node, reason)
        return reason is None


def _unsupported(node: torch.fx.Node, ops: set) -> str | None:
    if node.op != "call_function":
        return "not an operator call"
    if node.target not in ops:
        if node.target in SUPPORTED_OPS:
            return "the partitioner was told not to take this operator"
        return f"{BACKEND_ID} does not implement {node.target}"
    vals = [a.meta.get("val") for a in node.all_input_nodes] + [node.meta.get("val")]
    for v in vals:
        if isinstance(v, torch.Tensor) and v.dtype != torch.float32:
            return f"dtype {v.dtype} (the demo backend computes float32 only)"
        if not isinstance(v, torch.Tensor):
            return "a non-tensor operand"
    return None


class DemoPartitioner(Partitioner):
    """Tags every maximal group of supported nodes; weights they alone use go with them.

    ``ops`` narrows what it takes (default: everything the backend runs).
    ``ops_to_not_decompose`` keeps ``aten.linear`` whole under ``to_edge_transform_and_lower``
    (the backend runs it as one op instead of ``permute_copy`` + ``addmm``).
    """

    def __init__(self, compile_specs: list[CompileSpec] | None = None,
                 ops: set[torch._ops.OpOverload] | None = None) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec(BACKEND_ID, list(compile_specs or []))
        self.ops = set(SUPPORTED_OPS if ops is None else ops)
        unknown = self.ops - SUPPORTED_OPS
        if unknown:
            raise ValueError(f"{BACKEND_ID} cannot run {sorted(map(str, unknown))}")

    def ops_to_not_decompose(self, ep: ExportedProgram):
        return ([aten.linear.default] if aten.linear.default in self.ops else [], None)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        gm = exported_program.graph_module
        partitions = CapabilityBasedPartitioner(
            gm, _Support(self), allows_single_node_partition=True).propose_partitions()
        position = {n: i for i, n in enumerate(gm.graph.nodes)}
        partitions.sort(key=lambda p: min(position[n] for n in p.nodes))  # program order
        tags = {}
        for i, partition in enumerate(partitions):
            tag = f"demo_{i}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)


class AddMulPartitionerDemo(DemoPartitioner):
    """ExecuTorch's test partitioner of the same name: ``add.Tensor`` and ``mm`` only, with
    the compile spec ``max_value=4``."""

    def __init__(self) -> None:
        super().__init__([CompileSpec("max_value", bytes([4]))],
                         ops={aten.add.Tensor, aten.mm.default})


class ExecutorBackend(BackendDetails):
    """ExecuTorch's test backend of this name: the blob is the subgraph emitted as a whole
    ``.pte`` (the compile spec ``external_constants`` moves its weights to a ``.ptd``), run by
    a nested method at runtime (``nested_runtime``)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        from ...exir import ExecutorchBackendConfig
        from ...exir.program._program import EdgeProgramManager

        config = ExecutorchBackendConfig(
            external_constants=any(s.key == "external_constants" for s in compile_specs))
        blob = EdgeProgramManager(edge_program).to_executorch(config).buffer
        return PreprocessResult(processed_bytes=blob)
