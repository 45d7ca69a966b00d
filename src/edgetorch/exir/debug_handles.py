"""Debug handles: the integer that joins a runtime event back to a node of the user's model.

``to_edge`` gives every node except placeholders and outputs a ``node.meta["debug_handle"]``,
numbered as ExecuTorch 1.5.1's ``DebugHandleGeneratorPass`` numbers them (its Inspector and
ETRecord rely on the numbers matching):

- nodes are visited graph by graph, breadth first: the top graph in node order, then the
  branches of its control-flow ops (``cond``: true then false), then theirs;
- a node's identity is its *greatest ancestor* in the export flow, found by following
  ``meta["from_node"]`` to its root (``"<name>.<graph id>"``). Nodes decomposed from the same
  source node share its handle (``linear`` -> ``permute_copy`` + ``addmm``), and a ``getitem``
  shares the handle of the multi-output op it reads;
- handles start at 1 and a new identity takes the next free one.

A node without ``from_node`` (made by a pass that did not carry provenance) counts as its own
ancestor. The emitter turns the handles into the ``debug_handle_map`` of each method.
ExecuTorch's pass forms (``DebugHandleGeneratorPass``, ``generate_missing_debug_handles``) are
in ``passes/debug_handle_generator_pass.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from .graph_module import get_control_flow_submodules

DEBUG_HANDLE_KEY = "debug_handle"
FROM_NODE_KEY = "from_node"
UNSET_DEBUG_HANDLE = 0  # what the runtime reports for events with no handle (ExecuTorch's)


def control_flow_submodules(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """The branches/bodies of ``gm``'s control-flow ops, in node order (not nested ones)."""
    return [sub for _, sub, _ in get_control_flow_submodules(gm)]


def bfs_nodes(gm: torch.fx.GraphModule) -> Iterator[torch.fx.Node]:
    """Every node of ``gm`` and of its control-flow submodules, breadth first."""
    queue = [gm]
    while queue:
        current = queue.pop(0)
        yield from current.graph.nodes
        queue.extend(control_flow_submodules(current))


def ancestor_id(node: torch.fx.Node) -> str:
    """``"<name>.<graph id>"`` of the oldest node ``node`` was derived from."""
    sources = node.meta.get(FROM_NODE_KEY)
    if not sources:
        return f"{node.name}.{id(node.graph)}"
    source = sources[-1]
    while source.from_node:
        source = source.from_node[-1]
    return f"{source.name}.{source.graph_id}"


def generate_debug_handles(gm: torch.fx.GraphModule) -> None:
    """Number every node of ``gm`` (and its control-flow submodules) as described above."""
    handles: dict[str, int] = {}
    for node in bfs_nodes(gm):
        if node.op in ("placeholder", "output"):
            continue
        node.meta[DEBUG_HANDLE_KEY] = handles.setdefault(ancestor_id(node), len(handles) + 1)


def next_debug_handle(nodes: Iterable[torch.fx.Node]) -> int:
    """One past the largest handle among ``nodes`` (a new delegate call's handle)."""
    return max((n.meta.get(DEBUG_HANDLE_KEY) or 0 for n in nodes), default=0) + 1
