"""Draw a :class:`ViewGraph` as one self-contained HTML page (inline SVG, no scripts, no
network): nodes in layers by their distance from the inputs, coloured by kind, partition and
backend; hovering a node shows its operator, shape, debug handle, module and source line."""

from __future__ import annotations

import html
from collections import defaultdict

from .graph_view import ViewGraph, ViewNode

NODE_H, GAP_X, GAP_Y, MARGIN = 34, 24, 36, 20
MIN_W, PAD = 120, 10  # a node is as wide as its longest line (label or shape), at least MIN_W
CHAR_W = {"label": 7.0, "shape": 6.4}  # px per character of the monospace 11px / 10px text
LANE_W = 10  # the slot an edge passes through in a row it crosses (no node is placed there)

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


def short_label(node: ViewNode) -> str:
    """The drawn label: ``aten.`` and ``.default`` left out (the tooltip has the full
    target), never cut; the node is made as wide as it needs."""
    label = node.label
    if node.kind == "op" and label.startswith("aten."):
        label = label[len("aten."):]
    return label.removesuffix(".default")


def node_width(node: ViewNode) -> float:
    return max(MIN_W, 2 * PAD + max(len(short_label(node)) * CHAR_W["label"],
                                    len(node.shape) * CHAR_W["shape"]))


def _layout(nodes: list[ViewNode]) -> tuple[dict[str, tuple[float, float, float]],
                                             dict[tuple[str, str], list[float]], float, float]:
    """Rows by depth; an edge spanning rows gets a lane (a slot of LANE_W) in each row it
    crosses, so it is drawn through the gaps between nodes, never across one. Rows are
    ordered by the mean position of what feeds them (fewer crossings) and centred.
    Returns ``{id: (x, y, width)}``, ``{(source, user): [lane x per crossed row]}``, and the
    page size."""
    depth = _layers(nodes)
    ids = {n.id for n in nodes}
    by_id = {n.id: n for n in nodes}
    rows: dict[int, list[tuple[str, float, list[str]]]] = defaultdict(list)  # (key, w, preds)
    for n in nodes:
        rows[depth[n.id]].append((n.id, node_width(n), [i for i in n.inputs if i in ids]))
    lanes: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        for i in dict.fromkeys(n.inputs):
            if i not in ids or depth[n.id] - depth[i] < 2:
                continue
            keys, prev = [], i
            for d in range(depth[i] + 1, depth[n.id]):
                key = f"lane:{i}>{n.id}:{d}"
                rows[d].append((key, LANE_W, [prev]))
                keys.append(key)
                prev = key
            lanes[(i, n.id)] = keys
    order: dict[str, float] = {}
    for d in sorted(rows):
        if d:
            rows[d].sort(key=lambda item: sum(order.get(p, 0.0) for p in item[2]) /
                         max(1, len(item[2])))
        for k, item in enumerate(rows[d]):
            order[item[0]] = k
    row_w = {d: sum(w for _, w, _ in row) + GAP_X * (len(row) - 1) for d, row in rows.items()}
    width = 2 * MARGIN + max(row_w.values(), default=100)
    place: dict[str, tuple[float, float, float]] = {}
    for d, row in rows.items():
        x = MARGIN + (width - 2 * MARGIN - row_w[d]) / 2
        for key, w, _ in row:
            place[key] = (x, MARGIN + d * (NODE_H + GAP_Y), w)
            x += w + GAP_X
    lane_x = {edge: [place[k][0] + LANE_W / 2 for k in keys] for edge, keys in lanes.items()}
    nodes_place = {k: v for k, v in place.items() if k in by_id}
    height = 2 * MARGIN + (max(rows, default=0) + 1) * (NODE_H + GAP_Y)
    return nodes_place, lane_x, width, height


def _edge_path(src: tuple[float, float, float], dst: tuple[float, float, float],
               lane_x: list[float]) -> str:
    """From the bottom of ``src`` to the top of ``dst``: a curve across each gap between
    rows, straight down through each crossed row's lane."""
    x, y = src[0] + src[2] / 2, src[1] + NODE_H
    parts = [f"M{x:.1f},{y:.1f}"]
    for lx in lane_x:  # the lane's row starts GAP_Y below the current point
        top = y + GAP_Y
        mid = (y + top) / 2
        parts.append(f"C{x:.1f},{mid:.1f} {lx:.1f},{mid:.1f} {lx:.1f},{top:.1f}")
        y = top + NODE_H
        parts.append(f"L{lx:.1f},{y:.1f}")
        x = lx
    bx, by = dst[0] + dst[2] / 2, dst[1]
    mid = (y + by) / 2
    parts.append(f"C{x:.1f},{mid:.1f} {bx:.1f},{mid:.1f} {bx:.1f},{by:.1f}")
    return " ".join(parts)


def _svg(graph: ViewGraph, groups: dict[str, str]) -> str:
    nodes = [n for n in graph.nodes if n.kind != "param"]
    pos, lanes, width, height = _layout(nodes)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
             f'height="{height:.0f}" class="graph">']
    for n in nodes:
        for i in dict.fromkeys(n.inputs):
            if i in pos:
                parts.append(f'<path d="{_edge_path(pos[i], pos[n.id], lanes.get((i, n.id), []))}"'
                             f' class="edge" data-from="{html.escape(i)}" '
                             f'data-to="{html.escape(n.id)}"/>')
    for n in nodes:
        x, y, w = pos[n.id]
        handle = f' data-debug-handle="{html.escape(str(n.debug_handle))}"' \
            if n.debug_handle is not None else ""
        parts.append(
            f'<g class="node {n.kind}" id="node-{html.escape(n.id)}"{handle}>'
            f'<title>{html.escape(_tooltip(n))}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{NODE_H}" rx="6" '
            f'fill="{_colour(n, groups)}"/>'
            f'<text x="{x + w / 2:.1f}" y="{y + 14}">{html.escape(short_label(n))}</text>'
            f'<text x="{x + w / 2:.1f}" y="{y + 27}" class="shape">'
            f'{html.escape(n.shape)}</text></g>')
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
