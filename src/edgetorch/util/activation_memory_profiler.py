"""Memory trace of a planned method, in Chrome's trace-event JSON (ExecuTorch's
``executorch.util.activation_memory_profiler.generate_memory_trace``).

Open the file in ``chrome://tracing`` or Perfetto: each thread (``tid``) is one step of the
method at which some planned tensor is alive, each process (``pid``) a memory id, and each
event one live tensor, ``dur`` bytes wide. Without offsets the tensors of a step are stacked
one after another (``ts`` = running sum); with ``enable_memory_offsets=True`` ``ts`` is the
tensor's planned offset in its arena, so the picture is the arena itself.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import torch

from ..exir import memory
from ..exir.passes.memory_planning_pass import _specs_of, root
from ..exir.tensor import TensorSpec


@dataclass(frozen=True)
class Allocation:
    """One planned tensor, alive at one step."""

    name: str
    op_name: str
    memory_id: int
    memory_offset: int
    size_bytes: int
    fqn: str
    source: str | None


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


def allocations_by_step(graph: torch.fx.Graph) -> list[list[Allocation]]:
    """For each node position, the planned (non-constant) tensors alive there."""
    steps: list[list[Allocation]] = [[] for _ in graph.nodes]
    seen: set[int] = set()
    for node in graph.nodes:
        if node.op == "output" or node.target in (memory.alloc, memory.view):
            continue
        for spec in _specs_of(node):
            spec = root(spec)
            if id(spec) in seen or spec.const or not spec.planned:
                continue
            seen.add(id(spec))
            alloc = _allocation(node, spec)
            first, last = spec.lifetime
            for step in range(max(first, 0), last + 1):
                steps[step].append(alloc)
    return steps


def _allocation(node: torch.fx.Node, spec: TensorSpec) -> Allocation:
    return Allocation(
        name=node.name,
        op_name=str(node.target),
        memory_id=int(spec.mem_id),
        memory_offset=int(spec.mem_offset),
        size_bytes=spec.nbytes,
        fqn=_module_path(node),
        source=node.meta.get("stack_trace"),
    )


def memory_trace_events(graph: torch.fx.Graph, enable_memory_offsets: bool = False,
                        ommit_metadata: bool = False) -> list[dict[str, Any]]:
    """The trace events: one per (planned tensor, step at which it is alive)."""
    events: list[dict[str, Any]] = []
    tid = 0
    for allocations in allocations_by_step(graph):
        if not allocations:
            continue  # steps where nothing planned is alive get no thread
        stacked = 0
        for a in allocations:
            event: dict[str, Any] = {
                "name": a.name, "cat": "memory_allocation", "ph": "X",
                "ts": a.memory_offset if enable_memory_offsets else stacked,
                "dur": a.size_bytes, "pid": a.memory_id, "tid": tid, "args": {},
            }
            if not ommit_metadata:
                event["args"] = {"op_name": a.op_name, "Memory ID": a.memory_id, "fqn": a.fqn,
                                 "source": str(a.source), "bytes": a.size_bytes}
            stacked += a.size_bytes
            events.append(event)
        tid += 1
    return events


def generate_memory_trace(executorch_program_manager: Any, chrome_trace_filename: str | os.PathLike,
                          enable_memory_offsets: bool = False, method_name: str = "forward",
                          ommit_metadata: bool = False) -> dict[str, Any]:
    """Write the memory trace of ``method_name`` to ``chrome_trace_filename``; returns it too."""
    from ..exir.program import ExecutorchProgramManager

    if not isinstance(executorch_program_manager, ExecutorchProgramManager):
        raise ValueError("generate_memory_trace expects an ExecutorchProgramManager (the result of "
                         f"to_executorch()), got {type(executorch_program_manager).__name__}")
    graph = executorch_program_manager.exported_program(method_name).graph
    if not any(n.target is memory.alloc for n in graph.nodes):
        raise ValueError(f"method {method_name!r} has no memory planning: its program was "
                         "emitted without MemoryPlanningPass; plan memory in to_executorch")
    trace = {"traceEvents": memory_trace_events(graph, enable_memory_offsets, ommit_metadata)}
    with open(chrome_trace_filename, "w", encoding="ascii") as f:
        json.dump(trace, f, indent=2)
    return trace
