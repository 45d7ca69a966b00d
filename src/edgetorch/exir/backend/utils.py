"""Helpers for partitioner authors and for looking at delegated graphs."""

from __future__ import annotations

import logging
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ...errors import ExportError
from .lowered_backend_module import executorch_call_delegate
from .partitioner import TAG, DelegationSpec

logger = logging.getLogger(__name__)


def tag_capability_partitions(graph_module: torch.fx.GraphModule, support,
                              spec: DelegationSpec) -> dict[str, DelegationSpec]:
    """Tag the partitions torch's ``CapabilityBasedPartitioner`` proposes for ``support``
    (single nodes too) ``tag<id>``, as ExecuTorch's capability-based partitioners do; the
    ``partition_tags`` mapping each tag to ``spec``."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

    partitions = CapabilityBasedPartitioner(
        graph_module, support, allows_single_node_partition=True).propose_partitions()
    tags = {}
    for partition in partitions:
        tag = f"tag{partition.id}"
        for node in partition.nodes:
            node.meta[TAG] = tag
        tags[tag] = spec
    return tags


def tag_constant_data(edge_program: ExportedProgram) -> None:
    """Tag each weight/buffer/constant placeholder with a tag of the nodes that use it (the
    smallest, so the choice is the same every run), so the delegate owns it. Call after
    tagging the operators. ``to_backend`` then copies a weight that several partitions (or
    the program itself) read, one copy per user, unless it is marked ``no_copy``. Mutable
    buffers are left alone."""
    sig = edge_program.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    weights = {s.arg.name for s in sig.input_specs
               if s.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
               and s.target not in mutated}
    for node in edge_program.graph.nodes:
        if node.op != "placeholder" or node.name not in weights:
            continue
        tags = {u.meta[TAG] for u in node.users if u.meta.get(TAG) is not None}
        if len(tags) > 1:
            logger.info("%s is used by partitions %s; each gets a copy (mark it "
                        "node.meta['no_copy'] = True to refuse that)", node.name, sorted(tags))
        if tags:
            node.meta[TAG] = min(tags)


def tag_mutated_buffer(edge_program: ExportedProgram) -> None:
    """Tag each mutated buffer placeholder with a tag of the partitions that use it (the
    smallest, so a buffer shared by several partitions lands in the same one every run).
    Call after tagging the operators."""
    sig = edge_program.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    for node in edge_program.graph.nodes:
        if node.op != "placeholder" or sig.inputs_to_buffers.get(node.name) not in mutated:
            continue
        tags = {u.meta[TAG] for u in node.users if u.meta.get(TAG) is not None}
        if len(tags) > 1:
            logger.info("mutable buffer %s is used by partitions %s", node.name, sorted(tags))
        if tags:
            node.meta[TAG] = min(tags)


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


class DelegateMappingBuilder:
    """Builds a backend's ``PreprocessResult.debug_handle_map``: delegate debug identifier
    (what the backend's runtime reports its events under) -> the debug handles of the Edge
    nodes that work came from. The emitter puts it in ``delegate_map`` (ExecuTorch's class).

    With ``generated_identifiers=True`` identifiers are 0, 1, 2, ... in insertion order;
    otherwise each entry names its own (an int or a str), once.
    """

    def __init__(self, generated_identifiers: bool = False) -> None:
        self._generated = generated_identifiers
        self._map: dict[int | str, set[int]] = {}

    def get_delegate_mapping(self) -> dict[int | str, tuple[int, ...]]:
        return {k: tuple(sorted(v)) for k, v in self._map.items()}

    def insert_delegate_mapping_entry(
        self,
        nodes: torch.fx.Node | list[torch.fx.Node] | None = None,
        handles: int | list[int | None] | None = None,
        identifier: int | str | None = None,
    ) -> int | str:
        """Map ``identifier`` to the handles of ``nodes`` (or to ``handles``); returns it."""
        if self._generated and identifier is not None:
            raise ExportError(f"this DelegateMappingBuilder generates identifiers; do not pass "
                              f"one ({identifier!r})")
        if (nodes is None) == (handles is None):
            raise ExportError("give exactly one of nodes= or handles= to "
                              "insert_delegate_mapping_entry")
        if identifier is None:
            if not self._generated:
                raise ExportError("insert_delegate_mapping_entry needs an identifier= (or build "
                                  "with DelegateMappingBuilder(generated_identifiers=True))")
            identifier = len(self._map)
        if identifier in self._map:
            raise ExportError(f"delegate debug identifier {identifier!r} was already inserted")
        if nodes is not None:
            found = [n.meta.get("debug_handle") for n in (nodes if isinstance(nodes, list) else [nodes])]
        else:
            found = list(handles) if isinstance(handles, (list, tuple)) else [handles]
        kept = {int(h) for h in found if h is not None}
        if not kept:
            raise ExportError(f"delegate debug identifier {identifier!r}: none of the given "
                              "nodes/handles has a debug handle (run to_edge first)")
        self._map[identifier] = kept
        return identifier


def get_delegated_payload(graph_module: torch.fx.GraphModule
                          ) -> dict[str, tuple[str, list, bytes]]:
    """``{lowered module name: (backend id, compile specs, processed bytes)}`` for every
    delegate of the graph (what each backend's ``preprocess`` produced)."""
    payloads = {}
    for node in graph_module.graph.nodes:
        lowered = _lowered(node)
        if lowered is not None:
            payloads[node.name] = (lowered.backend_id, lowered.compile_specs,
                                   lowered.processed_bytes)
    return payloads


def _same_inputs(left: torch.fx.Node, right: torch.fx.Node) -> bool:
    """Same operation on the same-shaped inputs, compared down to the placeholders (an
    explicit stack: deep graphs must not hit the recursion limit)."""
    todo = [(left, right)]
    seen = set()
    while todo:
        a, b = todo.pop()
        if (a, b) in seen:
            continue
        seen.add((a, b))
        if a.op != b.op or a.target != b.target or \
                len(a.all_input_nodes) != len(b.all_input_nodes):
            return False
        todo.extend(zip(a.all_input_nodes, b.all_input_nodes))
    return True


def is_identical_graph(graph_left: torch.fx.GraphModule,
                       graph_right: torch.fx.GraphModule) -> bool:
    """The two graphs hold the same operations on the same inputs in the same node order
    (names, constants' values and metadata aside)."""
    left, right = list(graph_left.graph.nodes), list(graph_right.graph.nodes)
    return len(left) == len(right) and all(_same_inputs(a, b) for a, b in zip(left, right))
