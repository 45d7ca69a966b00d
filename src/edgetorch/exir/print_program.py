"""Readable views of graphs for error reports: ``inspect_node`` (ExecuTorch's
``exir.print_program.inspect_node``), ``add_cursor_to_graph`` and ``pretty_print_stacktraces``."""

from __future__ import annotations

import re

import torch

from ..schema.program import Frame, FrameList

_FRAME = re.compile(r'File "(.*?)", line (\d+), in (.*?)\n([^\n]*)')


def pretty_print_stacktraces(obj: FrameList) -> str:
    """A ``FrameList`` as a Python traceback."""
    text = "Traceback (most recent call last): \n"
    for frame in obj.items:
        text += f'    File "{frame.filename}", line {frame.lineno}, in {frame.name}\n'
        text += f"{frame.context} \n"
    return text + "\n"


def stacktrace_to_framelist(stacktrace: str) -> FrameList:
    """Parse a node's ``stack_trace`` (a formatted traceback; 3.11's caret lines are skipped)."""
    return FrameList([Frame(filename=f, lineno=int(n), name=name, context=src.strip())
                      for f, n, name, src in _FRAME.findall(stacktrace)])


def add_cursor_to_graph(graph: torch.fx.Graph, finding_node: torch.fx.Node) -> str:
    """The graph as ``fx.Graph`` prints it, with ``-->`` in front of ``finding_node``."""
    lines = ["graph():"]
    for node in graph.nodes:
        text = node.format_node()
        if text:
            lines.append(("--> " if node is finding_node else "    ") + text)
    return "\n".join(lines)


def inspect_node(graph: torch.fx.Graph, node: torch.fx.Node) -> str:
    """The graph with ``node`` marked, then the node's spec and the user's stack trace."""
    text = (f"Here is the node in the graph module:\n{add_cursor_to_graph(graph, node)}\n"
            f"This node {node} has metadata of:\n")
    if "spec" in node.meta:
        text += f"The node spec:\n{node.meta['spec']}\n"
    if "stack_trace" in node.meta and node.meta["stack_trace"]:
        frames = stacktrace_to_framelist(node.meta["stack_trace"])
        text += f"The node stacktrace:\n{pretty_print_stacktraces(frames)}\n"
    return text


_stacktrace_to_framelist = stacktrace_to_framelist  # ExecuTorch's (private) name, imported by backends
