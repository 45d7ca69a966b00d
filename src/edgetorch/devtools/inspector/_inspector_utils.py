"""The Inspector's helpers, at ExecuTorch 1.5.1's path (``devtools.inspector._inspector_utils``):
time scales, ETDump event helpers, the debug-handle joins between the ATen program, the Edge
program and the runtime's events, and the matching behind ``Inspector.calculate_numeric_gap``.

Debug handles are carried back from the Edge program to the ATen program the user exported,
so numeric gaps name the model's own layers (``conv2d``, ``linear``) as ExecuTorch does. Every
node keeps ``meta["from_node"]``: the chain of nodes (name, graph id) it was made from, back to
the exported graph. An ATen node gets the handle of the Edge nodes made from it; an ATen node no
Edge node came from (removed as a no-op) gets none.

torch is imported where a helper needs it, so the Inspector still reads ETDumps without it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

from ...errors import InspectorError
from ._compare import (  # noqa: F401  (ExecuTorch's names for the output metrics)  # noqa: F401
    calculate_cosine_similarity,
    calculate_mse,
    calculate_snr,
    compare_results,
    plot_metric,
)
from ._table import display_or_print_df  # noqa: F401

if TYPE_CHECKING:
    import torch

    from ...schema import etdump as E
    from ..debug_format.base_schema import OperatorGraph, OperatorNode

DebugHandle = tuple[int, ...]
DEBUG_HANDLE = "debug_handle"
FROM_NODE = "from_node"
UNSET_DEBUG_HANDLE = 0

FORWARD = "forward"
EDGE_DIALECT_GRAPH_KEY = "edge_dialect_graph_module"
RESERVED_FRAMEWORK_EVENT_NAMES = ["Method::init", "Program::load_method", "Method::execute"]
# Columns ExecuTorch leaves out of the printed table and the TSV.
EXCLUDED_COLUMNS_WHEN_PRINTING = ["raw", "delegate_debug_identifier", "stack_traces",
                                  "module_hierarchy", "debug_data"]
EXCLUDED_EVENTS_WHEN_PRINTING = {"OPERATOR_CALL"}
# OPERATOR_CALL wraps the kernel's own event, which carries the same values.
EXCLUDED_EVENTS_FOR_INTERMEDIATE_OUTPUT = {"OPERATOR_CALL"}

MAX_ETDUMP_BYTES = 1 << 30  # an ETDump holds events, not tensors (those are in the buffer)


class TimeScale(str, Enum):
    NS = "ns"
    US = "us"
    MS = "ms"
    S = "s"
    CYCLES = "cycles"


# Ticks per second of each scale (cycles only ever convert to cycles).
TICKS_PER_SECOND = {TimeScale.NS: 1e9, TimeScale.US: 1e6, TimeScale.MS: 1e3, TimeScale.S: 1.0,
                    TimeScale.CYCLES: 1.0}


def calculate_time_scale_factor(source: TimeScale, target: TimeScale) -> float:
    """Source ticks per target tick."""
    return TICKS_PER_SECOND[TimeScale(source)] / TICKS_PER_SECOND[TimeScale(target)]


class NodeFilter:
    """Which FX nodes count as operators with outputs to compare: ``metadata_key`` set in the
    node's meta, opcode ``op_type``, and none of ``exclude_ops`` in the node's name."""

    def __init__(self, metadata_key: str, op_type: str, exclude_ops: list[str] | None = None
                 ) -> None:
        self.metadata_key = metadata_key
        self.op_type = op_type
        self.exclude_ops = list(exclude_ops or [])

    def matches(self, node: torch.fx.Node) -> bool:
        return (node.meta.get(self.metadata_key) is not None and node.op == self.op_type
                and not any(name in node.name for name in self.exclude_ops))


# Operators whose outputs the reference and the runtime both have (getitem only unpacks).
OPERATOR_FILTER = NodeFilter(DEBUG_HANDLE, "call_function", exclude_ops=["getitem"])


def as_debug_handle(handle: int | Sequence[int]) -> DebugHandle:
    return (handle,) if isinstance(handle, int) else tuple(handle)


# ---- ETDump events -----------------------------------------------------------------------


def find_populated_event(event: E.Event) -> E.ProfileEvent | E.DebugEvent:
    """The profile event of an ETDump ``Event``, else its debug event."""
    if event.profile_event is not None:
        return event.profile_event
    if event.debug_event is not None:
        return event.debug_event
    raise ValueError("the ETDump event holds neither a profile nor a debug event")


def is_debug_output(value: E.Value | None) -> bool:
    """Whether a logged value is one of the program's outputs (not an intermediate one)."""
    return bool(value is not None and value.output is not None and value.output.bool_val)


def is_inference_output_equal(output1: Any, output2: Any) -> bool:
    """Equal tensors, equal lists of tensors (pairwise over the shorter), or equal values."""
    import torch

    if isinstance(output1, torch.Tensor) and isinstance(output2, torch.Tensor):
        return torch.equal(output1, output2)
    if isinstance(output1, list) and isinstance(output2, list):
        return all(torch.equal(a, b) for a, b in zip(output1, output2))
    return bool(output1 == output2)


def read_capped(path: str | os.PathLike, cap: int, what: str) -> bytes:
    """A file's bytes, refused (before reading) when larger than ``cap``."""

    size = os.path.getsize(path)
    if size > cap:
        raise InspectorError(f"{what} file {os.fspath(path)!r} has {size} bytes, more than the "
                             f"{cap} an {what} may have; pass the file the runtime wrote")
    with open(path, "rb") as f:
        return f.read(cap + 1)


def gen_etdump_object(etdump_path: str | os.PathLike | None = None,
                      etdump_data: bytes | None = None) -> E.ETDump:
    """The ETDump of a file or of bytes (the file wins when both are given, as in ExecuTorch)."""
    from ...schema import etdump as E

    if isinstance(etdump_data, E.ETDump):
        return etdump_data
    if etdump_path is not None and etdump_data is None:
        etdump_data = read_capped(etdump_path, MAX_ETDUMP_BYTES, "ETDump")
    if etdump_data is None:
        raise ValueError("no ETDump: pass exactly one of etdump_path and etdump_data")
    return E.deserialize_from_etdump_flatcc(etdump_data)


# ---- operator graphs of the ETRecord ------------------------------------------------------


def gen_graphs_from_etrecord(etrecord: Any, enable_module_hierarchy: bool = False
                             ) -> dict[str, OperatorGraph]:
    """An ``FXOperatorGraph`` per program of the ETRecord: its graph map's, and the Edge
    program's under ``EDGE_DIALECT_GRAPH_KEY``."""
    from ..debug_format.et_schema import FXOperatorGraph

    def graph(program: Any) -> OperatorGraph:
        return FXOperatorGraph.gen_operator_graph(
            program.graph_module, enable_module_hierarchy=enable_module_hierarchy)

    graphs = {name: graph(ep) for name, ep in (etrecord.graph_map or {}).items()}
    edge = etrecord.edge_dialect_program
    if isinstance(edge, dict):
        edge = edge.get(FORWARD)
    if edge is not None:
        graphs[EDGE_DIALECT_GRAPH_KEY] = graph(edge)
    return graphs


def create_debug_handle_to_op_node_mapping(op_graph: OperatorGraph
                                           ) -> dict[Any, list[OperatorNode]]:
    """{debug handle: the operator nodes carrying it}, over the graph and its sub-graphs.

    A handle can name several nodes (an ATen op decomposed into several Edge ops)."""
    from ..debug_format.base_schema import OperatorGraph, OperatorNode

    mapping: dict[Any, list[OperatorNode]] = {}
    # Depth first in element order, without recursion; a graph listed inside itself is
    # visited once.
    stack: list[Iterator[Any]] = [iter(op_graph.elements)]
    seen = {id(op_graph)}
    while stack:
        element = next(stack[-1], _END)
        if element is _END:
            stack.pop()
        elif isinstance(element, OperatorGraph):
            if id(element) not in seen:
                seen.add(id(element))
                stack.append(iter(element.elements))
        elif isinstance(element, OperatorNode) and element.metadata:
            handle = element.metadata.get(DEBUG_HANDLE)
            if handle is not None:
                mapping.setdefault(_hashable(handle), []).append(element)
    return mapping


_END = object()


def _hashable(handle: Any) -> Any:
    return tuple(handle) if isinstance(handle, list) else handle


# ---- debug handles carried back to the exported program ---------------------------------


def graph_modules(gm: torch.fx.GraphModule) -> Iterator[torch.fx.GraphModule]:
    """The graph and its control-flow branches (cond / while / map bodies), breadth first."""
    from torch.fx import GraphModule

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
                if isinstance(sub, GraphModule):
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
    matched = {_hashable(h) for n in _nodes(gm)
               if (h := _match(n, exported_program_graph_id, handles)) is not None}
    if not disable_debug_handle_valdiation and any(
            _hashable(h) not in matched for n in _nodes(edge_dialect_program.graph_module)
            if (h := n.meta.get(DEBUG_HANDLE)) is not None):
        return False
    for node in _nodes(gm):
        handle = _match(node, exported_program_graph_id, handles)
        node.meta[DEBUG_HANDLE] = UNSET_DEBUG_HANDLE if handle is None else handle
    return True


def handle_key(node: torch.fx.Node) -> DebugHandle | None:
    """The node's debug handle as a tuple, for the operators ``OPERATOR_FILTER`` keeps."""
    if not OPERATOR_FILTER.matches(node):
        return None
    return as_debug_handle(node.meta[DEBUG_HANDLE])


def nodes_by_handle(gm: torch.fx.GraphModule,
                    value: Callable[[torch.fx.Node], Any]) -> dict[DebugHandle, list[Any]]:
    out: dict[DebugHandle, list[Any]] = {}
    for node in gm.graph.nodes:
        key = handle_key(node)
        if key is not None:
            out.setdefault(key, []).append(value(node))
    return out


def get_aot_debug_handle_to_op_name_mapping(gm: torch.fx.GraphModule
                                            ) -> dict[DebugHandle, list[str]]:
    """{debug handle: names of the graph's operators that carry it}."""
    return nodes_by_handle(gm, lambda n: n.name)


def find_op_names(handle: DebugHandle, names: Mapping[DebugHandle, list[str]]) -> list[str]:
    """Names of the ops whose handles all lie in ``handle``."""
    wanted = set(handle)
    return [n for key, ops in names.items() if set(key) <= wanted for n in ops]


# ---- runtime and AOT outputs matched by debug handle -------------------------------------


def _merge_keys(first: DebugHandle, second: DebugHandle) -> DebugHandle:
    """``first`` without ``second``'s handles, then ``second`` (deduplicated), in order."""
    seen = set(second)
    out = [h for h in first if h not in seen]
    kept = set(out)
    for h in second:
        if h not in kept:
            out.append(h)
            kept.add(h)
    return tuple(out)


def merge_runtime_overlapping_debug_handles(outputs: dict[DebugHandle, tuple[int, Any, int]]
                      ) -> dict[DebugHandle, tuple[int, Any, int]]:
    """Join groups that share a handle; the latest instruction's values stand for the group."""
    merged: dict[DebugHandle, tuple[int, Any, int]] = {}
    for key, value in outputs.items():
        current, best = key, value
        for other in [k for k in merged if set(k) & set(key)]:
            other_value = merged.pop(other)
            if other_value[0] < value[0]:
                current = _merge_keys(other, current)
            else:
                current = _merge_keys(current, other)
                best = other_value
        merged[current] = best
    return merged


def _components(aot: dict[DebugHandle, Any], runtime: dict[DebugHandle, tuple[Any, int]]
                ) -> list[tuple[list[tuple[DebugHandle, Any]], list[tuple]]]:
    """Groups of AOT and runtime outputs joined by shared handles, in AOT graph order."""
    nodes: list[tuple[bool, DebugHandle, Any]] = [(True, k, v) for k, v in aot.items()]
    nodes += [(False, k, v) for k, v in runtime.items()]
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_handle: dict[int, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, (is_aot, key, _) in enumerate(nodes):
        for h in key:
            by_handle[h][0 if is_aot else 1].append(i)
    for aot_ids, rt_ids in by_handle.values():
        for a in aot_ids:
            for r in rt_ids:
                parent[find(a)] = find(r)
    groups: dict[int, list[int]] = {}
    for i in range(len(nodes)):
        groups.setdefault(find(i), []).append(i)
    out = []
    for members in sorted(groups.values(), key=min):
        aot_list = [(nodes[i][1], nodes[i][2]) for i in members if nodes[i][0]]
        rt_list = [(nodes[i][1], *nodes[i][2]) for i in members if not nodes[i][0]]
        if aot_list and rt_list:
            out.append((aot_list, rt_list))
    return out


def map_runtime_aot_intermediate_outputs(aot: dict[DebugHandle, Any], runtime: dict[DebugHandle, tuple[Any, int]]
                ) -> dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]:
    """{(handle, AOT output): (runtime handle, runtime output)} for every matched output."""

    mapping: dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]] = {}
    for aot_list, rt_list in _components(aot, runtime):
        if len(rt_list) != 1:
            raise InspectorError(f"AOT outputs {[k for k, _ in aot_list]} overlap several runtime "
                                 f"handle groups {[r[0] for r in rt_list]}; the ETRecord's debug "
                                 "handles do not fit this ETDump")
        rt_key, rt_out, num_outputs = rt_list[0]
        aot_map = dict(aot_list)
        if not {k[0] for k in aot_map} <= set(rt_key):
            continue
        for i in range(num_outputs):
            index = -(i + 1)
            if len(rt_key) < i + 1 or (rt_key[index],) not in aot_map:
                continue
            aot_out = aot_map[(rt_key[index],)]
            if isinstance(aot_out, (list, tuple)):
                aot_out, rt_mapped = _sequence_pair(aot_out, rt_out, index)
            else:
                rt_mapped = _runtime_value(aot_out, rt_out, num_outputs, index)
            if rt_mapped is not None:
                mapping[(rt_key, aot_out)] = (rt_key, rt_mapped)
    return mapping


def _sequence_pair(aot_out: Sequence, rt_out: Any, index: int) -> tuple[tuple, Any]:
    if not isinstance(rt_out, (list, tuple)) or len(rt_out) < -index:
        return tuple(aot_out), None
    last = rt_out[index]
    if isinstance(last, list):  # a delegate's TensorList output
        return tuple(aot_out), tuple(last)
    return tuple(aot_out), tuple(rt_out)


def _runtime_value(aot_out: Any, rt_out: Any, num_outputs: int, index: int) -> Any:
    """The logged value that holds this AOT output."""
    import torch

    if not isinstance(rt_out, (list, tuple)):
        return rt_out
    if len(rt_out) < -index:
        return None
    if num_outputs == 1 and len(rt_out) > 1 and isinstance(aot_out, torch.Tensor):
        # One op, several outputs (layer norm's out, mean, rstd): the one shaped like the
        # AOT output, then the one with its dtype too; else the last.
        same_shape = [v for v in rt_out if isinstance(v, torch.Tensor)
                      and tuple(v.shape) == tuple(aot_out.shape)]
        if len(same_shape) == 1:
            return same_shape[0]
        same_dtype = [v for v in same_shape if v.dtype == aot_out.dtype]
        if len(same_dtype) == 1:
            return same_dtype[0]
    return rt_out[index]


def convert_to_float_tensor(value: Any) -> torch.Tensor:
    """A scalar, array or tensor as a float64 CPU tensor with NaN replaced by 0 (as
    ExecuTorch's comparators see values)."""
    import torch

    if isinstance(value, Sequence) and not isinstance(value, torch.Tensor):
        # Comparators compare a sequence element by element: a whole one here is a caller's
        # bug (ExecuTorch asserts the same).
        raise AssertionError(f"convert_to_float_tensor got a {type(value).__name__}; compare "
                             "sequences element by element")
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, RuntimeError, ValueError) as e:
        raise ValueError(f"Cannot convert value of type {type(value)} to a tensor: {e}") from None
    tensor = tensor.detach().cpu().double()
    return torch.nan_to_num(tensor, nan=0.0) if torch.isnan(tensor).any() else tensor
