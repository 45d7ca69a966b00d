"""What the ETRecord says about an event: its debug handles (from the instruction id and, for
work inside a delegate, the delegate's own map), then the Edge nodes that carry those handles
(op types, stack traces, module hierarchy) — the same joins as ExecuTorch 1.5.1's Inspector."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate

from ...errors import ETRecordError
from ..debug_format.base_schema import OperatorNode
from ._event import EventBlock
from ._inspector_utils import DEBUG_HANDLE, FORWARD


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
        self.by_handle: dict[Any, list[OperatorNode]] = {}  # the Edge nodes of each handle
        for node in edge_nodes(self.program) if self.program is not None else []:
            handle = node.meta[DEBUG_HANDLE]
            try:
                key = _hashable(handle)
                hash(key)
            except TypeError:
                raise ETRecordError(f"node {node.name!r} has debug handle {str(handle)[:40]!r}, "
                                    "not an integer; the ETRecord is corrupted") from None
            self.by_handle.setdefault(key, []).append(OperatorNode(
                node.name, metadata={DEBUG_HANDLE: handle,
                                     "stack_trace": node.meta.get("stack_trace"),
                                     "nn_module_stack": node.meta.get("nn_module_stack")},
                op=op_name(node)))

    def resolve(self, block: EventBlock) -> None:
        """Set the debug handles, output counts and delegate backends of the block's events."""
        block._gen_resolve_debug_handles(self.handle_map, self.delegate_map, self.num_outs_map)


def _hashable(handle: Any) -> Any:
    return tuple(handle) if isinstance(handle, list) else handle
