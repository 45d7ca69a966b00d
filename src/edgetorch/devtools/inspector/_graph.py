"""What the ETRecord says about an event: its debug handles (from the instruction id and, for
work inside a delegate, the delegate's own map), then the Edge nodes that carry those handles
(op types, stack traces, module hierarchy) — the same joins as ExecuTorch 1.5.1's Inspector."""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate

from ._event import DELEGATE_CALL, FRAMEWORK_EVENTS, Event

DEBUG_HANDLE = "debug_handle"
FORWARD = "forward"

log = logging.getLogger(__name__)


def op_name(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__name__", None)
    if name and "." in name:  # Edge ops are named "aten.convolution.default"
        return name
    return str(target)


def edge_nodes(ep: Any) -> list[torch.fx.Node]:
    """Every node with a debug handle, delegated subgraphs included, in graph order."""
    out = []
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is executorch_call_delegate:
            lowered = getattr(ep.graph_module, node.args[0].target)
            out.extend(edge_nodes(lowered.original_module))
        elif node.op == "call_function" and DEBUG_HANDLE in node.meta \
                and node.target is not operator.getitem:  # ExecuTorch's op graph has none
            out.append(node)
    return out


def _str_keys(maps: dict | None, method: str = FORWARD) -> dict[str, Any] | None:
    if maps is None:
        return None
    return {str(k): v for k, v in (maps.get(method) or {}).items()}


class GraphInfo:
    def __init__(self, etrecord: Any) -> None:
        edge = etrecord.edge_dialect_program
        self.program = edge[FORWARD] if isinstance(edge, dict) else edge
        # String keys whatever the record holds (ExecuTorch's in-memory record has int keys,
        # which its own Inspector then fails to find).
        self.handle_map = _str_keys(etrecord._debug_handle_map) or {}
        self.delegate_map = _str_keys(etrecord._delegate_map)
        self.num_outs_map = _str_keys(etrecord._instruction_id_to_num_outs_map) or {}
        self.by_handle: dict[int, list[torch.fx.Node]] = {}
        for node in edge_nodes(self.program) if self.program is not None else []:
            self.by_handle.setdefault(_hashable(node.meta[DEBUG_HANDLE]), []).append(node)

    def resolve(self, event: Event) -> None:
        """Set the event's debug handles, output count and delegate backend."""
        if event._instruction_id is None:
            return
        instruction = str(event._instruction_id)
        if instruction not in self.handle_map:
            return
        event.num_outputs = int(self.num_outs_map.get(instruction, 1))
        delegate = (self.delegate_map or {}).get(instruction)
        if event.delegate_debug_identifier is None:
            event.debug_handles = self.handle_map[instruction]
            if event.name == DELEGATE_CALL and delegate is not None:
                event.delegate_backend_name = delegate.get("name", "")
            return
        if delegate is None:
            event.debug_handles = self.handle_map[instruction]
            log.warning("no delegate mapping found for the delegate at instruction %s",
                        instruction)
            return
        event.delegate_backend_name = delegate.get("name", "")
        inner = delegate.get("delegate_map") or {}
        identifier = event.delegate_debug_identifier
        handles = inner.get(identifier)  # type: ignore[call-overload]
        if handles is None:
            handles = inner.get(str(identifier))
            # ExecuTorch also accepts a map key that is part of the identifier string.
            for key, value in inner.items():
                if key in str(identifier):
                    handles = value
        event.debug_handles = handles

    def associate(self, event: Event) -> None:
        """Op types, stack traces and module hierarchy of the nodes the event's handles name."""
        if event.name in FRAMEWORK_EVENTS or event.debug_handles is None:
            return
        handles = event.debug_handles
        for handle in [handles] if isinstance(handles, int) else handles:
            for node in self.by_handle.get(handle, []):
                if node.name not in event.stack_traces:
                    event.stack_traces[node.name] = node.meta.get("stack_trace")
                    event.module_hierarchy[node.name] = node.meta.get("nn_module_stack")
                event.op_types.append(op_name(node))


def _hashable(handle: Any) -> Any:
    return tuple(handle) if isinstance(handle, list) else handle
