"""What the ETRecord says about an instruction: its debug handles, the Edge nodes that carry
them (op types, stack traces, module hierarchy), and the delegate that ran it."""

from __future__ import annotations

from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate

DEBUG_HANDLE = "debug_handle"


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
        elif node.op == "call_function" and DEBUG_HANDLE in node.meta:
            out.append(node)
    return out


def _str_keys(maps: dict | None, method: str = "forward") -> dict[str, Any]:
    return {str(k): v for k, v in ((maps or {}).get(method) or {}).items()}


class GraphInfo:
    def __init__(self, etrecord: Any, enable_module_hierarchy: bool = False) -> None:
        edge = etrecord.edge_dialect_program
        self.program = edge["forward"] if isinstance(edge, dict) else edge
        # string keys whatever the record holds (ExecuTorch's in-memory record has int keys)
        self.handle_map = _str_keys(etrecord._debug_handle_map)
        self.delegate_map = _str_keys(etrecord._delegate_map)
        self.num_outs_map = _str_keys(etrecord._instruction_id_to_num_outs_map)
        self.by_handle: dict[int, list[torch.fx.Node]] = {}
        for node in edge_nodes(self.program) if self.program is not None else []:
            h = node.meta[DEBUG_HANDLE]
            for handle in (h if isinstance(h, (list, tuple)) else [h]):
                self.by_handle.setdefault(int(handle), []).append(node)

    def handles(self, instruction_id: int) -> tuple[int, ...]:
        h = self.handle_map.get(str(instruction_id))
        if h is None:
            return ()
        return tuple(h) if isinstance(h, list) else (h,)

    def num_outs(self, instruction_id: int) -> int:
        return int(self.num_outs_map.get(str(instruction_id), 0))

    def nodes(self, handles: tuple[int, ...]) -> list[torch.fx.Node]:
        return [n for h in handles for n in self.by_handle.get(h, [])]

    def annotate(self, event: Any, delegated: bool) -> None:
        delegate = self.delegate_map.get(str(event._instruction_id))
        if delegated:  # delegate-internal work: only what the backend's own map names
            inner = (delegate or {}).get("delegate_map") or {}
            h = inner.get(str(event.delegate_debug_identifier))
            handles = tuple(h) if isinstance(h, list) else ((h,) if h is not None else ())
        else:
            handles = self.handles(event._instruction_id or 0)
        event.debug_handles = handles[0] if len(handles) == 1 else (handles or None)
        if delegate is not None and event.chain_index != -1:
            event.delegate_backend_name = delegate.get("name")
        if event.chain_index == -1:  # framework events: handles of instruction 0, no op types
            return
        nodes = self.nodes(handles)
        event.op_types = [op_name(n) for n in nodes]
        event.stack_traces = {n.name: n.meta.get("stack_trace") for n in nodes}
        event.module_hierarchy = {n.name: n.meta.get("nn_module_stack") for n in nodes}
