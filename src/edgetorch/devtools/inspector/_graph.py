"""What the ETRecord says about an event: its debug handles (from the instruction id and, for
work inside a delegate, the delegate's own map), then the Edge nodes that carry those handles
(op types, stack traces, module hierarchy) — the same joins as ExecuTorch 1.5.1's Inspector."""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate

from ...errors import ETRecordError
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


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_values(handles: dict, delegates: dict, num_outs: dict) -> None:
    """The maps' values as the lookups below use them (a saved ETRecord's maps are JSON from
    the file): handles an int or a list of ints, a delegate entry a map whose ``delegate_map``
    is a map of handles, output counts ints."""
    def bad(name: str, key: str, value: Any, want: str) -> None:
        raise ETRecordError(f"ETRecord {name} entry {key!r} is {str(value)[:60]!r}, expected "
                            f"{want}; the ETRecord is corrupted: generate it again")

    def is_handles(v: Any) -> bool:
        return _is_int(v) or (isinstance(v, list) and all(_is_int(h) for h in v))

    for key, v in handles.items():
        if not is_handles(v):
            bad("debug_handle_map", key, v, "an int or a list of ints")
    for key, v in num_outs.items():
        if not _is_int(v):
            bad("instruction_id_to_num_outs_map", key, v, "an int")
    for key, v in delegates.items():
        inner = v.get("delegate_map") if isinstance(v, dict) else None
        if not isinstance(v, dict) or not isinstance(inner or {}, dict) or \
                not all(is_handles(h) for h in (inner or {}).values()):
            bad("delegate_map", key, v, "a map with a 'delegate_map' of handles")


class GraphInfo:
    def __init__(self, etrecord: Any) -> None:
        edge = etrecord.edge_dialect_program
        self.program = edge[FORWARD] if isinstance(edge, dict) else edge
        # String keys whatever the record holds (ExecuTorch's in-memory record has int keys,
        # which its own Inspector then fails to find).
        self.handle_map = _str_keys(etrecord._debug_handle_map) or {}
        self.delegate_map = _str_keys(etrecord._delegate_map)
        self.num_outs_map = _str_keys(etrecord._instruction_id_to_num_outs_map) or {}
        _check_values(self.handle_map, self.delegate_map or {}, self.num_outs_map)
        self.by_handle: dict[Any, list[torch.fx.Node]] = {}
        for node in edge_nodes(self.program) if self.program is not None else []:
            handle = node.meta[DEBUG_HANDLE]
            try:
                key = _hashable(handle)
                hash(key)
            except TypeError:
                raise ETRecordError(f"node {node.name!r} has debug handle {str(handle)[:40]!r}, "
                                    "not an integer; the ETRecord is corrupted") from None
            self.by_handle.setdefault(key, []).append(node)

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
