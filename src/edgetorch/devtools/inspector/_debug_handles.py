"""Debug handles carried back from the Edge program to the ATen program the user exported, so
numeric gaps name the model's own layers (``conv2d``, ``linear``) as ExecuTorch 1.5.1 does.

Every node keeps ``meta["from_node"]``: the chain of nodes (name, graph id) it was made from,
back to the exported graph. An ATen node gets the handle of the Edge nodes made from it; an
ATen node no Edge node came from (removed as a no-op) gets none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

DEBUG_HANDLE = "debug_handle"
FROM_NODE = "from_node"
UNSET_DEBUG_HANDLE = 0


def graph_modules(gm: torch.fx.GraphModule) -> Iterator[torch.fx.GraphModule]:
    """The graph and its control-flow branches (cond / while / map bodies), breadth first."""
    queue = [gm]
    seen: set[int] = set()
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for node in current.graph.nodes:
            if node.op == "get_attr":
                sub = getattr(current, str(node.target), None)
                if isinstance(sub, torch.fx.GraphModule):
                    queue.append(sub)


def _nodes(gm: torch.fx.GraphModule) -> Iterator[torch.fx.Node]:
    for module in graph_modules(gm):
        for node in module.graph.nodes:
            if node.op not in ("placeholder", "output"):
                yield node


def ancestors(node: torch.fx.Node) -> list[str]:
    """``name.graph_id`` of every node this one was made from, nearest first."""
    chain = node.meta.get(FROM_NODE)
    if not chain:
        return []
    source = chain[-1]
    out = [f"{source.name}.{source.graph_id}"]
    for _ in range(10_000):  # provenance chains are short; a cycle must not hang us
        if not source.from_node:
            break
        source = source.from_node[-1]
        out.append(f"{source.name}.{source.graph_id}")
    return out


def _ancestor_handles(edge: Any) -> dict[str, Any]:
    handles: dict[str, Any] = {}
    for node in _nodes(edge.graph_module):
        for ancestor in ancestors(node):
            handles.setdefault(ancestor, node.meta.get(DEBUG_HANDLE))
    return handles


def _match(node: torch.fx.Node, graph_id: int, handles: dict[str, Any]) -> Any:
    own = f"{node.name}.{graph_id}"
    if own in handles:
        return handles[own]
    for ancestor in ancestors(node):
        if ancestor in handles:
            return handles[ancestor]
    return None


def propagate_back_debug_handle(exported_program: Any, exported_program_graph_id: int,
                                edge_dialect_program: Any,
                                disable_debug_handle_valdiation: bool = False) -> bool:
    """Give the ATen program's nodes the handles of the Edge nodes made from them.

    Returns False (and changes nothing) when some Edge node's handle has no ATen node, unless
    validation is disabled.
    """
    handles = _ancestor_handles(edge_dialect_program)
    gm = exported_program.graph_module
    matched = {_key(h) for n in _nodes(gm)
               if (h := _match(n, exported_program_graph_id, handles)) is not None}
    if not disable_debug_handle_valdiation and any(
            _key(h) not in matched for n in _nodes(edge_dialect_program.graph_module)
            if (h := n.meta.get(DEBUG_HANDLE)) is not None):
        return False
    for node in _nodes(gm):
        handle = _match(node, exported_program_graph_id, handles)
        node.meta[DEBUG_HANDLE] = UNSET_DEBUG_HANDLE if handle is None else handle
    return True


def _key(handle: Any) -> Any:
    return tuple(handle) if isinstance(handle, list) else handle


def handle_key(node: torch.fx.Node) -> tuple[int, ...] | None:
    """The node's debug handle as a tuple, for call_function nodes other than getitem."""
    handle = node.meta.get(DEBUG_HANDLE)
    if handle is None or node.op != "call_function" or "getitem" in node.name:
        return None
    return (handle,) if isinstance(handle, int) else tuple(handle)


def nodes_by_handle(gm: torch.fx.GraphModule,
                    value: Callable[[torch.fx.Node], Any]) -> dict[tuple[int, ...], list[Any]]:
    out: dict[tuple[int, ...], list[Any]] = {}
    for node in gm.graph.nodes:
        key = handle_key(node)
        if key is not None:
            out.setdefault(key, []).append(value(node))
    return out
