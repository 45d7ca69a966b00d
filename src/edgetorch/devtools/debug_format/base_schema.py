"""Plain records for a model graph, independent of where it came from.

A :class:`Node` names its producers in ``inputs``; an :class:`OperatorGraph` groups nodes and
sub-graphs (inputs / body / outputs, or the nodes one ``nn.Module`` produced). Field names,
order and defaults are ExecuTorch 1.5.1's, so code written against its
``debug_format.base_schema`` builds the same records positionally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Node:
    name: str
    inputs: list[Node] | None = None  # the nodes whose values this one consumes
    output_shapes: list[list[int]] | None = None
    metadata: dict[str, Any] | None = None
    named_args: list[str] | None = None  # argument names from the operator's schema


@dataclass
class OperatorGraph:
    graph_name: str  # what a viewer groups (and collapses) the elements under
    elements: list[Node | OperatorGraph]
    metadata: dict[str, Any] | None = None


@dataclass
class ValueNode(Node):
    """A value that is not an operator call: a graph input or output, a constant argument."""

    dtype: str = ""
    val: Any | None = None


@dataclass
class OperatorNode(Node):
    op: str | None = None  # the operator's name, e.g. ``aten.add.Tensor``
