"""``LoweredBackendModule``: a subgraph compiled by a backend, and the graph op that calls it.

The call is ``torch.ops.higher_order.executorch_call_delegate(lowered_module, *inputs)``, the
higher-order operator torch itself defines for ExecuTorch (same name, same semantics): eager
and fake-tensor calls run ``original_module``, so a program holding delegates can still be
exported, re-traced and given tensor specs. Its result is always a list of outputs, read with
``operator.getitem``.
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import (
    executorch_call_delegate,
    get_lowered_module_name,
    is_lowered_module,
)
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

from .compile_spec_schema import CompileSpec
from .copying import copy_graph

__all__ = [
    "LoweredBackendModule",
    "executorch_call_delegate",
    "get_lowered_module_name",
    "get_lowered_submodules",
    "is_lowered_module",
]


class LoweredBackendModule(torch.nn.Module):
    """The output of ``to_backend(backend_id, edge_program, compile_specs)``.

    Calling it (or composing it into another ``nn.Module`` and exporting that) runs
    ``executorch_call_delegate``. ``program()``/``buffer()`` turn it alone into a program.
    """

    def __init__(self, edge_program: ExportedProgram, backend_id: str, processed_bytes: bytes,
                 compile_specs: list[CompileSpec], named_data_store_output: Any = None) -> None:
        super().__init__()
        self._original_exported_program = edge_program
        self._backend_id = backend_id
        self._processed_bytes = bytes(processed_bytes)
        self._compile_specs = [CompileSpec(cs.key, bytes(cs.value)) for cs in compile_specs]
        self._named_data_store_output = named_data_store_output
        self.meta: dict[str, Any] | None = None

    @property
    def backend_id(self) -> str:
        return self._backend_id

    @property
    def processed_bytes(self) -> bytes:
        return self._processed_bytes

    @property
    def compile_specs(self) -> list[CompileSpec]:
        return self._compile_specs

    @property
    def original_module(self) -> ExportedProgram:
        """The Edge-dialect subgraph this module was compiled from."""
        return self._original_exported_program

    @property
    def named_data_store_output(self) -> Any:
        return self._named_data_store_output

    def forward(self, *args: Any) -> Any:
        return executorch_call_delegate(self, *args)

    def __deepcopy__(self, memo: dict[int, Any]) -> LoweredBackendModule:
        # The weights are shared (nothing mutates them); graph and signature are copied.
        res = LoweredBackendModule(copy_graph(self._original_exported_program), self._backend_id, self._processed_bytes,
                                   self._compile_specs, self._named_data_store_output)
        res.meta = copy.copy(self.meta)
        return res

    def __repr__(self) -> str:
        return (f"LoweredBackendModule(backend_id={self._backend_id!r}, "
                f"{len(self._processed_bytes)} bytes, {len(self._compile_specs)} compile specs)")

    # ---- a program of its own ------------------------------------------------------------

    def exported_program(self) -> ExportedProgram:
        """A program whose only work is calling this delegate on the subgraph's user inputs."""
        ep = self._original_exported_program
        user_inputs = set(ep.graph_signature.user_inputs)
        graph = torch.fx.Graph()
        root = torch.nn.Module()
        inputs = []
        for node in ep.graph.nodes:
            if node.op == "placeholder" and node.name in user_inputs:
                ph = graph.placeholder(node.name)
                ph.meta["val"] = node.meta["val"]
                inputs.append(ph)
        name = get_lowered_module_name(root, self)
        call = graph.call_function(executorch_call_delegate, (graph.get_attr(name), *inputs))
        vals = [a.meta["val"] for a in ep.graph.output_node().args[0]]
        call.meta["val"] = vals
        outs = []
        for i, val in enumerate(vals):
            item = graph.call_function(operator.getitem, (call, i))
            item.meta["val"] = val
            outs.append(item)
        graph.output(outs)
        gm = torch.fx.GraphModule(root, graph)
        signature = ExportGraphSignature(
            input_specs=[InputSpec(InputKind.USER_INPUT, TensorArgument(p.name), None)
                         for p in inputs],
            output_specs=[OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(o.name), None)
                          for o in outs])
        return ExportedProgram(
            root=gm, graph=gm.graph, graph_signature=signature, state_dict={},
            range_constraints=copy.deepcopy(ep.range_constraints),
            module_call_graph=copy.deepcopy(ep.module_call_graph), verifiers=[ep.verifier])

    def program(self, emit_stacktrace: bool = False, memory_planning: Any = None) -> Any:
        """This delegate alone as an emitted program (``edgetorch.schema.program.Program``)."""
        return self._manager(emit_stacktrace, memory_planning, True).executorch_program

    def buffer(self, extract_delegate_segments: bool = False, segment_alignment: int = 128,
               constant_tensor_alignment: int | None = None,
               delegate_alignment: int | None = None, memory_planning: Any = None) -> bytes:
        """This delegate alone as ``.pte`` bytes."""
        return self._manager(False, memory_planning, extract_delegate_segments,
                             segment_alignment, constant_tensor_alignment,
                             delegate_alignment).buffer

    def _manager(self, emit_stacktrace: bool, memory_planning: Any,
                 extract_delegate_segments: bool, segment_alignment: int = 128,
                 constant_tensor_alignment: int | None = None,
                 delegate_alignment: int | None = None) -> Any:
        from ..config import EdgeCompileConfig, ExecutorchBackendConfig
        from ..lowering import copy_program
        from ..program import EdgeProgramManager

        config = ExecutorchBackendConfig(
            emit_stacktrace=emit_stacktrace, extract_delegate_segments=extract_delegate_segments,
            segment_alignment=segment_alignment,
            constant_tensor_alignment=constant_tensor_alignment,
            delegate_alignment=delegate_alignment)
        if memory_planning is not None:
            config.memory_planning_pass = memory_planning
        # to_executorch lowers its programs in place; this module's program stays as it is.
        edge = EdgeProgramManager({"forward": copy_program(self.exported_program())},
                                  compile_config=EdgeCompileConfig(_check_ir_validity=False))
        return edge.to_executorch(config)


def get_lowered_submodules(
    graph_module: torch.fx.GraphModule,
) -> list[tuple[str, LoweredBackendModule, torch.fx.Node]]:
    """``(attribute name, lowered module, call node)`` of every delegate call in the graph."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is executorch_call_delegate:
            name = node.args[0].target
            found.append((name, getattr(graph_module, name), node))
    return found


def get_lowered_backend_modules(graph_module: torch.fx.GraphModule) -> list[LoweredBackendModule]:
    """The lowered modules the graph's delegate calls run, in call order."""
    return [module for _, module, _ in get_lowered_submodules(graph_module)]
