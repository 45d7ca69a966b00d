"""Helpers for partitioner authors and for looking at delegated graphs."""

from __future__ import annotations

import logging
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from .lowered_backend_module import executorch_call_delegate
from .partitioner import TAG

logger = logging.getLogger(__name__)


def tag_constant_data(edge_program: ExportedProgram) -> None:
    """Tag each weight/buffer/constant placeholder with the tag of the nodes that use it, so
    the delegate owns it. Call after tagging the operators. A weight used by several
    partitions (or by untagged nodes) stays in the program and reaches each delegate as an
    input; mutable buffers always stay."""
    sig = edge_program.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    weights = {s.arg.name for s in sig.input_specs
               if s.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
               and s.target not in mutated}
    for node in edge_program.graph.nodes:
        if node.op != "placeholder" or node.name not in weights:
            continue
        tags = {u.meta.get(TAG) for u in node.users}
        if len(tags) == 1 and None not in tags:
            node.meta[TAG] = tags.pop()
        elif len(tags - {None}) > 1:
            logger.info("%s is used by partitions %s; it stays in the program", node.name,
                        sorted(t for t in tags if t is not None))


def is_delegate_call(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is executorch_call_delegate


def _is_delegate_getitem(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and node.target is operator.getitem
            and isinstance(node.args[0], torch.fx.Node) and is_delegate_call(node.args[0]))


def get_delegates(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The ``get_attr`` nodes of the lowered modules in ``graph``."""
    return [n for n in graph.nodes if n.op == "get_attr" and _lowered(n) is not None]


def get_non_lowered_nodes(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """Operator calls left to the portable runtime (delegate calls and their getitems aside)."""
    return [n for n in graph.nodes if n.op == "call_function" and not is_delegate_call(n)
            and not _is_delegate_getitem(n)]


def _lowered(node: torch.fx.Node):
    if node.op != "get_attr":
        return None
    module = getattr(node.graph.owning_module, str(node.target), None)
    return module if type(module).__name__ == "LoweredBackendModule" else None


def format_delegated_graph(graph_module: torch.fx.GraphModule) -> str:
    """The graph, with each lowered module's backend id and subgraph printed under it."""
    indent = "  "
    lines = ["graph():"]
    for node in graph_module.graph.nodes:
        lines.append(f"{indent}{node.format_node()}")
        lowered = _lowered(node)
        if lowered is not None:
            lines.append(f"{indent * 2}backend_id: {lowered.backend_id}")
            lines.append(f"{indent * 2}lowered graph():")
            for inner in lowered.original_module.graph.nodes:
                lines.append(f"{indent * 3}{inner.format_node()}")
    return "\n".join(lines) + "\n"


def print_delegated_graph(graph_module: torch.fx.GraphModule) -> None:
    print(format_delegated_graph(graph_module))
