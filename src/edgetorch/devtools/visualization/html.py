"""Draw a :class:`ViewGraph` as one self-contained HTML page (inline SVG, no scripts, no
network): nodes in layers by their distance from the inputs, coloured by kind, partition and
backend; hovering a node shows its operator, shape, debug handle, module and source line."""

from __future__ import annotations

import html
from collections import defaultdict

from .graph_view import ViewGraph, ViewNode

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 210, 34, 24, 30, 20

KIND_COLOURS = {
    "input": "#cfe8ff", "output": "#ffe0b3", "op": "#eeeeee", "getitem": "#f7f7f7",
    "delegate": "#b9f0c4", "param": "#f0e6ff",
}
# Partitions (before lowering) and backends (after) get colours from one palette, in order.
PALETTE = ["#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5",
           "#ffed6f", "#bc80bd", "#ccebc5"]


def _layers(nodes: list[ViewNode]) -> dict[str, int]:
    """Row of each node: one below its lowest input; an operator fed only by weights sits
    just above its first user instead of in the top row."""
    depth: dict[str, int] = {}
    for n in nodes:  # graph order is topological
        depth[n.id] = 1 + max((depth[i] for i in n.inputs if i in depth), default=-1)
    users: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        for i in n.inputs:
            users[i].append(n.id)
    for n in reversed(nodes):
        if n.kind != "input" and not any(i in depth for i in n.inputs) and users[n.id]:
            depth[n.id] = max(0, min(depth[u] for u in users[n.id]) - 1)
    return depth


def _colour(node: ViewNode, groups: dict[str, str]) -> str:
    if node.backend:
        return groups.setdefault("backend:" + node.backend, PALETTE[len(groups) % len(PALETTE)])
    if node.partition:
        return groups.setdefault("tag:" + node.partition, PALETTE[len(groups) % len(PALETTE)])
    return KIND_COLOURS.get(node.kind, "#eeeeee")


def _tooltip(node: ViewNode) -> str:
    rows = [node.id, node.target]
    rows += [f"{k}: {v}" for k, v in (
        ("shape", node.shape), ("debug handle", node.debug_handle), ("module", node.module),
        ("partition", node.partition), ("backend", node.backend), ("source", node.source))
        if v not in ("", None)]
    return "\n".join(rows)


def _svg(graph: ViewGraph, groups: dict[str, str]) -> str:
    nodes = [n for n in graph.nodes if n.kind != "param"]
    depth = _layers(nodes)
    rows: dict[int, list[ViewNode]] = defaultdict(list)
    for n in nodes:
        rows[depth[n.id]].append(n)
    pos = {}
    for d, row in rows.items():
        for i, n in enumerate(row):
            pos[n.id] = (MARGIN + i * (NODE_W + GAP_X), MARGIN + d * (NODE_H + GAP_Y))
    width = MARGIN * 2 + max(len(r) for r in rows.values()) * (NODE_W + GAP_X) if rows else 100
    height = MARGIN * 2 + (max(rows) + 1) * (NODE_H + GAP_Y) if rows else 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'class="graph">']
    for n in nodes:
        x2, y2 = pos[n.id]
        for i in n.inputs:
            if i in pos:
                x1, y1 = pos[i]
                ax, ay, bx, by = x1 + NODE_W / 2, y1 + NODE_H, x2 + NODE_W / 2, y2
                mid = (ay + by) / 2
                parts.append(f'<path d="M{ax},{ay} C{ax},{mid} {bx},{mid} {bx},{by}" '
                             'class="edge"/>')
    for n in nodes:
        x, y = pos[n.id]
        label = n.label if len(n.label) <= 30 else n.label[:29] + "…"
        handle = f' data-debug-handle="{html.escape(str(n.debug_handle))}"' \
            if n.debug_handle is not None else ""
        parts.append(
            f'<g class="node {n.kind}" id="node-{html.escape(n.id)}"{handle}>'
            f'<title>{html.escape(_tooltip(n))}</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6" '
            f'fill="{_colour(n, groups)}"/>'
            f'<text x="{x + NODE_W / 2}" y="{y + 14}">{html.escape(label)}</text>'
            f'<text x="{x + NODE_W / 2}" y="{y + 27}" class="shape">'
            f'{html.escape(n.shape[:34])}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


_STYLE = """
body { font-family: sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin-top: 28px; }
.graph text { font-size: 11px; text-anchor: middle; font-family: monospace; }
.graph text.shape { fill: #555; font-size: 10px; }
.graph rect { stroke: #666; stroke-width: 1; }
.graph g.delegate rect { stroke: #1b7a35; stroke-width: 2.5; }
.graph g:hover rect { stroke: #d62728; stroke-width: 3; }
.graph path.edge { fill: none; stroke: #999; stroke-width: 1.2; }
.legend span { display: inline-block; padding: 2px 8px; margin: 2px; border: 1px solid #666;
               border-radius: 4px; font-size: 12px; }
.summary { font-size: 13px; color: #444; }
"""


def render_html(graph: ViewGraph) -> str:
    """The page: a legend, the graph and each delegate's lowered subgraph."""
    groups: dict[str, str] = {}
    sections = [f"<h1>{html.escape(graph.title)}</h1>", "", _svg(graph, groups)]
    for sub in graph.subgraphs.values():
        sections.append(f"<h2>{html.escape(sub.title)}</h2>")
        sections.append(_svg(sub, groups))
    ops = sum(n.kind == "op" for n in graph.nodes)
    delegates = sum(n.kind == "delegate" for n in graph.nodes)
    legend = "".join(f'<span style="background:{c}">{html.escape(k)}</span>'
                     for k, c in [*KIND_COLOURS.items(), *groups.items()] if k != "param")
    sections[1] = (f'<p class="summary">{ops} operators, {delegates} delegate calls, '
                   f'{len(graph.subgraphs)} lowered subgraphs. Hover a node for its operator, '
                   f'shape, debug handle, module and source line.</p>'
                   f'<div class="legend">{legend}</div>')
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(graph.title)}</title><style>{_STYLE}</style></head><body>"
            + "\n".join(sections) + "</body></html>")
