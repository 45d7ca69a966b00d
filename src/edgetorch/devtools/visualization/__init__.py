"""Look at a program: ``visualize(program, "graph.html")`` writes a self-contained HTML page
(ExecuTorch's ``executorch.devtools.visualization`` needs the Model Explorer server; this needs
nothing and works offline). Nodes are coloured by kind, partition and delegate; hovering shows
the operator, shape, debug handle, module and the user's source line."""

from __future__ import annotations

import os
import webbrowser
from typing import Any

from .graph_view import ViewGraph, ViewNode, build_view
from .html import render_html

__all__ = ["ViewGraph", "ViewNode", "build_view", "render_html", "visualize", "visualize_graph",
           "visualize_with_clusters"]


def visualize(program: Any, html_file: str | os.PathLike = "graph.html",
              method_name: str = "forward", no_open_in_browser: bool = True,
              title: str | None = None) -> str:
    """Write the graph of ``program`` (ExportedProgram, Edge/Executorch program manager or
    GraphModule) to ``html_file``; returns its path. ``no_open_in_browser=False`` opens it."""
    page = render_html(build_view(program, method_name, title))
    path = os.fspath(html_file)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    if not no_open_in_browser:
        webbrowser.open("file://" + os.path.abspath(path))
    return path


def visualize_graph(graph_module: Any, exported_program: Any = None,
                    html_file: str | os.PathLike = "graph.html") -> str:
    """ExecuTorch's ``visualize_graph``: draw one graph module (e.g. a lowered subgraph)."""
    return visualize(graph_module, html_file)


def visualize_with_clusters(exported_program: Any, json_file_name: str | None = None, **kwargs):
    """ExecuTorch's Model Explorer JSON export: not available in edgetorch yet.

    Use :func:`visualize` for an offline HTML view of the same graph.
    """
    raise NotImplementedError(
        "visualize_with_clusters (Model Explorer's JSON format) is not implemented in edgetorch; "
        "use edgetorch.devtools.visualization.visualize(program, 'graph.html') for an offline "
        "HTML view with partitions, delegates, debug handles and source lines")
