"""``Inspector.calculate_numeric_gap``, matched as ExecuTorch 1.5.1 matches.

1. The reference graph: the ATen program the user exported, once the Edge program's debug
   handles are carried back to it (so rows name ``conv2d``, ``linear``); else the Edge program.
2. It runs on the ETRecord's representative inputs; each debug handle keeps its node's output.
3. Each runtime event with op types (``native_call_*``, ``DELEGATE_CALL``, a delegate's inner
   step) gives its handles and logged values; the latest instruction wins a handle, and events
   whose handles overlap merge.
4. AOT and runtime outputs whose handles overlap are matched; the last handle of the runtime
   group names the AOT output to compare. A runtime op with several outputs (layer norm's
   mean and rstd) is matched by shape and dtype, a delegate call's logged arguments from the end.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import _runs as R
from ._debug_handles import handle_key, nodes_by_handle, propagate_back_debug_handle
from ._event import DELEGATE_CALL, OPERATOR_CALL
from .numerical_comparator import (
    L1Comparator,
    MSEComparator,
    NumericalComparatorBase,
    SNRComparator,
)

if TYPE_CHECKING:
    from ._inspector import Inspector

DebugHandle = tuple[int, ...]
COMPARATORS = {"MSE": MSEComparator, "L1": L1Comparator, "SNR": SNRComparator}
EXPORTED_PROGRAM = "exported_program"
EDGE_PROGRAM = "edge_dialect_exported_program"

log = logging.getLogger(__name__)


def resolve_reference_graph(record: Any, reference_graph: str | None,
                            disable_validation: bool) -> tuple[torch.fx.GraphModule, str]:
    from ._inspector import InspectorError

    name = reference_graph
    if reference_graph in (None, EXPORTED_PROGRAM):
        if record.exported_program is not None and propagate_back_debug_handle(
                record.exported_program, record.export_graph_id, _edge(record),
                disable_validation):
            name = EXPORTED_PROGRAM
        elif reference_graph is None:
            log.warning("the ETRecord has no ATen program, or its debug handles could not be "
                        "carried back to it; comparing against the Edge program")
            name = EDGE_PROGRAM
        else:
            raise InspectorError(
                "cannot compare against 'exported_program': the ETRecord has none, or some Edge "
                "node's debug handle has no ATen node; pass disable_debug_handle_valdiation=True "
                "or reference_graph='edge_dialect_exported_program'")
    if name == EDGE_PROGRAM:
        return _edge(record).module(), name
    if name == EXPORTED_PROGRAM:
        return record.exported_program.module(), name
    lookup = name if "/" in name else f"{name}/forward"
    graphs = record.graph_map or {}
    if lookup not in graphs:
        raise InspectorError(f"reference graph {lookup!r} is not in the ETRecord; use "
                             f"'{EXPORTED_PROGRAM}', '{EDGE_PROGRAM}' or one of {sorted(graphs)}")
    return graphs[lookup].module(), name


def _edge(record: Any) -> Any:
    edge = record.edge_dialect_program
    return edge["forward"] if isinstance(edge, dict) else edge


class _Capture(torch.fx.Interpreter):
    """Runs a graph and keeps each debug handle's output (the last node of a handle wins)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.outputs: dict[DebugHandle, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        key = handle_key(n)
        if key is not None:
            if isinstance(value, torch.Tensor):
                self.outputs[key] = value.detach().clone()
            elif isinstance(value, (tuple, list)):
                self.outputs[key] = [v.detach().clone() if isinstance(v, torch.Tensor) else v
                                     for v in value]
            else:
                self.outputs[key] = value
        return value


def capture(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> dict[DebugHandle, Any]:
    runner = _Capture(gm)
    with torch.no_grad():
        runner.run(*inputs)
    return runner.outputs


def runtime_outputs(inspector: Inspector
                    ) -> tuple[dict[DebugHandle, tuple[Any, int]], dict[DebugHandle, list[str]]]:
    """Each runtime handle group's logged values and output count, and the event's name."""
    # A delegate that logged its inner steps makes its DELEGATE_CALL (spanning them all) moot.
    inner: dict[str | None, set[int]] = defaultdict(set)
    for block in inspector.event_blocks:
        for ev in block.events:
            if ev.is_delegated_op and ev.op_types and ev.debug_data \
                    and ev.debug_handles is not None:
                inner[ev.delegate_backend_name].update(_as_key(ev.debug_handles))
    found: dict[DebugHandle, tuple[int, Any, int]] = {}
    names: dict[DebugHandle, list[str]] = {}
    for block in inspector.event_blocks:
        for ev in block.events:
            if ev.name == OPERATOR_CALL or not ev.op_types or not ev.debug_data:
                continue
            if any(v is R.MISSING for v in ev.debug_data):
                from ._inspector import InspectorError

                raise InspectorError("the ETDump's tensors are in a debug buffer that was not "
                                     "given; pass debug_buffer_path= (written with "
                                     "debug_buffer_size > 0)")
            key = _as_key(ev.debug_handles)
            covered = inner.get(ev.delegate_backend_name)
            if ev.name == DELEGATE_CALL and covered and not covered.isdisjoint(key):
                continue
            if ev._instruction_id > found.get(key, (-1,))[0]:
                found[key] = (ev._instruction_id, ev.debug_data, ev.num_outputs)
                names[key] = [ev.name]
    merged = merge_overlapping(found)
    return {k: (v[1], v[2]) for k, v in merged.items()}, names


def _as_key(handles: Any) -> DebugHandle:
    return (handles,) if isinstance(handles, int) else tuple(handles)


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


def merge_overlapping(outputs: dict[DebugHandle, tuple[int, Any, int]]
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


def map_outputs(aot: dict[DebugHandle, Any], runtime: dict[DebugHandle, tuple[Any, int]]
                ) -> dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]:
    """{(handle, AOT output): (runtime handle, runtime output)} for every matched output."""
    from ._inspector import InspectorError

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


def find_op_names(handle: DebugHandle, names: dict[DebugHandle, list[str]]) -> list[str]:
    """Names of the ops whose handles all lie in ``handle``."""
    wanted = set(handle)
    return [n for key, ops in names.items() if set(key) <= wanted for n in ops]


def make_comparator(inspector: Inspector, distance: Any) -> NumericalComparatorBase:
    from ._inspector import InspectorError

    if isinstance(distance, NumericalComparatorBase):
        if distance.inspector is None:
            distance.inspector = inspector
        return distance
    metric = str(distance).strip().upper()
    if metric not in COMPARATORS:
        raise InspectorError(f"unknown distance {distance!r}; use one of {sorted(COMPARATORS)} "
                             "or a NumericalComparatorBase")
    return COMPARATORS[metric](inspector=inspector)


def numeric_gap(inspector: Inspector, distance: Any, disable_validation: bool,
                reference_graph: str | None):
    from ._inspector import InspectorError

    record = inspector._etrecord
    if record is None:
        raise InspectorError("calculate_numeric_gap needs an ETRecord; pass etrecord= (a path or "
                             "et_manager.get_etrecord())")
    inputs = record._representative_inputs
    if not inputs:
        raise InspectorError("the ETRecord has no representative inputs; call "
                             "etrecord.update_representative_inputs([x]) with the inputs the "
                             "runtime ran, then save it again")
    if not inspector.has_debug_buffer:
        raise InspectorError("the ETDump's tensors are in a debug buffer that was not given; pass "
                             "debug_buffer_path= (written with debug_buffer_size > 0)")
    comparator = make_comparator(inspector, distance)
    gm, _ = resolve_reference_graph(record, reference_graph, disable_validation)
    # Several runs' inputs (a bundled program's cases): the first run is the one compared.
    if isinstance(inputs[0], (list, tuple)):
        inputs = inputs[0]
    aot = capture(gm, list(inputs))
    aot_names = nodes_by_handle(gm, lambda n: n.name)
    if not aot or not aot_names:
        raise InspectorError("the reference graph has no nodes with debug handles; the ETRecord "
                             "was not made by to_edge(..., generate_etrecord=True)")
    traces = nodes_by_handle(gm, lambda n: (n.name, n.meta.get("stack_trace")))
    runtime, runtime_names = runtime_outputs(inspector)
    df = comparator.compare(map_outputs(aot, runtime), aot_names, runtime_names)
    stack = {name: trace for pairs in traces.values() for name, trace in pairs}
    df["stacktraces"] = [{op: stack.get(op) for op in ops} for ops in df["aot_ops"]]
    return df
