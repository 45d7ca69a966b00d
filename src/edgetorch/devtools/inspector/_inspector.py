"""The Inspector (``executorch.devtools.Inspector``): runtime events (ETDump) joined with the
compiler's record (ETRecord) through instruction ids and debug handles.

Where ExecuTorch fails its users, this one says so instead: an in-memory ETRecord works (map
keys are normalised), a numeric gap without a debug buffer or representative inputs is a
typed error, and runs with different inputs become separate event blocks.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any

import numpy as np

from ...errors import EdgeTorchError
from ...runtime.event_tracer import RecordingEventTracer
from ...schema import etdump as E
from . import _events as R


class InspectorError(EdgeTorchError, ValueError):
    """The Inspector lacks what a request needs (an ETRecord, a debug buffer, inputs)."""


class TimeScale(str, Enum):
    NS = "ns"
    US = "us"
    MS = "ms"
    S = "s"
    CYCLES = "cycles"


_NS_PER = {TimeScale.NS: 1, TimeScale.US: 1e3, TimeScale.MS: 1e6, TimeScale.S: 1e9}
OPERATOR_CALL = "OPERATOR_CALL"
DELEGATE_CALL = "DELEGATE_CALL"


@dataclass
class PerfData:
    raw: list[float]

    def _pct(self, q: float) -> float:
        return float(np.percentile(self.raw, q))

    @property
    def p10(self) -> float:
        return self._pct(10)

    @property
    def p50(self) -> float:
        return self._pct(50)

    @property
    def p90(self) -> float:
        return self._pct(90)

    @property
    def avg(self) -> float:
        return float(statistics.mean(self.raw))

    @property
    def min(self) -> float:
        return float(min(self.raw))

    @property
    def max(self) -> float:
        return float(max(self.raw))


@dataclass
class Event:
    name: str
    perf_data: PerfData | None = None
    op_types: list[str] = field(default_factory=list)
    delegate_debug_identifier: int | str | None = None
    debug_handles: int | tuple[int, ...] | None = None
    stack_traces: dict[str, str] = field(default_factory=dict)
    module_hierarchy: dict[str, Any] = field(default_factory=dict)
    is_delegated_op: bool | None = None
    delegate_backend_name: str | None = None
    debug_data: list[Any] = field(default_factory=list)
    start_time: list[int] | None = None
    _instruction_id: int | None = None
    num_outputs: int = 0
    chain_index: int = -1


@dataclass
class EventBlock:
    name: str
    events: list[Event] = field(default_factory=list)
    bundled_input_index: int | None = None
    run_output: Any = None
    reference_output: Any = None


class Inspector:
    def __init__(self, etdump_path: str | None = None, etdump_data: Any = None,
                 etrecord: Any = None, source_time_scale: TimeScale | str = TimeScale.NS,
                 target_time_scale: TimeScale | str = TimeScale.MS,
                 debug_buffer_path: str | None = None, delegate_metadata_parser: Any = None,
                 delegate_time_scale_converter: Any = None, enable_module_hierarchy: bool = False,
                 reference_graph_name: str = "edge_dialect_graph_module") -> None:
        if (etdump_path is None) == (etdump_data is None):
            raise ValueError("pass exactly one of etdump_path and etdump_data")
        source, target = TimeScale(source_time_scale), TimeScale(target_time_scale)
        if (source == TimeScale.CYCLES) != (target == TimeScale.CYCLES):
            raise ValueError("CYCLES must be the source and the target time scale, or neither")
        self._scale = 1.0 if source == target else _NS_PER[source] / _NS_PER[target]
        self._unit = target.value
        self._metadata_parser = delegate_metadata_parser
        self._time_converter = delegate_time_scale_converter
        self.reference_graph_name = reference_graph_name
        self.has_debug_buffer = True
        if isinstance(etdump_data, RecordingEventTracer):
            runs = R.runs_from_tracer(etdump_data)
        else:
            data = etdump_data
            if etdump_path is not None:
                with open(etdump_path, "rb") as f:
                    data = f.read()
            etdump = data if isinstance(data, E.ETDump) else E.deserialize_from_etdump_flatcc(data)
            buffer = None
            if debug_buffer_path is not None:
                with open(debug_buffer_path, "rb") as f:
                    buffer = f.read()
            self.has_debug_buffer = buffer is not None
            runs = R.runs_from_etdump(etdump, buffer)
        if isinstance(etrecord, (str, os.PathLike)):
            from ..etrecord import parse_etrecord
            etrecord = parse_etrecord(etrecord)
        self._etrecord = etrecord
        from ._graph import GraphInfo
        self._graph = GraphInfo(etrecord, enable_module_hierarchy) if etrecord else None
        self.event_blocks = self._blocks(runs)

    # ---- building blocks -------------------------------------------------------------------

    def _blocks(self, runs: list[R.RawRun]) -> list[EventBlock]:
        groups: list[tuple[tuple, list[R.RawRun]]] = []
        for run in runs:
            sig = _signature(run)
            for key, members in groups:
                if key == sig and _same_values(members[0], run):
                    members.append(run)
                    break
            else:
                groups.append((sig, [run]))
        names: dict[str, int] = {}
        blocks = []
        for _, members in groups:
            base = members[0].name
            n = names.get(base, 0)
            names[base] = n + 1
            blocks.append(self._block(base if n == 0 else f"{base}_{n}", members))
        return blocks

    def _block(self, name: str, runs: list[R.RawRun]) -> EventBlock:
        first = runs[0]
        profiles = [i for i, e in enumerate(first.events) if isinstance(e, R.RawProfile)]
        events, pending = [], []
        outputs = []
        for i, e in enumerate(first.events):
            if isinstance(e, R.RawDebug):
                (outputs if e.output else pending).append(e)
                continue
            event = self._event(e, [r.events[i] for r in runs])
            if e.name != OPERATOR_CALL:
                values = [d.value for d in pending if d.instruction_id == e.instruction_id
                          and d.chain_index == e.chain_index]
                if values and e.delegate_debug_id_int == -1 and e.delegate_debug_id_str is None:
                    if e.name == DELEGATE_CALL and self._graph is not None:
                        n = self._graph.num_outs(e.instruction_id)
                        values = values[-n:] if n else values
                    event.debug_data = values
                    event.num_outputs = len(values)
                    pending = [d for d in pending if d.instruction_id != e.instruction_id]
            events.append(event)
        del profiles
        run_output = [d.value for d in outputs] or None
        return EventBlock(name, events, first.bundled_input_index, run_output)

    def _event(self, e: R.RawProfile, same: list[R.RawProfile]) -> Event:
        delegate_id = e.delegate_debug_id_str if e.delegate_debug_id_str is not None else (
            e.delegate_debug_id_int if e.delegate_debug_id_int != -1 else None)
        delegated = delegate_id is not None
        name = e.name or (e.delegate_debug_id_str if delegated else None) or str(delegate_id)
        if delegated and not e.name and e.delegate_debug_id_str is None:
            name = str(delegate_id)
        raw = []
        for s in same:
            duration = s.end_time - s.start_time
            if delegated and self._time_converter is not None:
                duration = self._time_converter(name, duration)
            raw.append(duration * self._scale)
        event = Event(name=name, perf_data=PerfData(raw), delegate_debug_identifier=delegate_id,
                      is_delegated_op=delegated, start_time=[s.start_time for s in same],
                      _instruction_id=e.instruction_id, chain_index=e.chain_index)
        if self._graph is not None:
            self._graph.annotate(event, delegated)
        return event

    # ---- reporting -------------------------------------------------------------------------

    def to_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False):
        import pandas as pd

        u = f" ({self._unit})" if include_units else ""
        rows = []
        for block in self.event_blocks:
            for ev in block.events:
                p = ev.perf_data
                rows.append({
                    "event_block_name": block.name, "event_name": ev.name,
                    "raw": p.raw if p else [], f"p10{u}": p.p10 if p else None,
                    f"p50{u}": p.p50 if p else None, f"p90{u}": p.p90 if p else None,
                    f"avg{u}": p.avg if p else None, f"min{u}": p.min if p else None,
                    f"max{u}": p.max if p else None, "op_types": ev.op_types,
                    "delegate_debug_identifier": ev.delegate_debug_identifier,
                    "stack_traces": ev.stack_traces, "module_hierarchy": ev.module_hierarchy,
                    "is_delegated_op": ev.is_delegated_op,
                    "delegate_backend_name": ev.delegate_backend_name,
                    "debug_data": ev.debug_data, "start_time": ev.start_time,
                })
        return pd.DataFrame(rows, columns=_columns(u))

    def _table(self):
        df = self.to_dataframe()
        df = df[df["event_name"] != OPERATOR_CALL]
        return df.drop(columns=["raw", "delegate_debug_identifier", "stack_traces",
                                "module_hierarchy", "debug_data"])

    def print_data_tabular(self, file: IO[str] | None = None, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        """One row per event, without OPERATOR_CALL rows (ExecuTorch's table)."""
        import pandas as pd

        with pd.option_context("display.max_rows", None, "display.max_columns", None,
                               "display.width", 250, "display.max_colwidth", 60):
            print(self._table().to_string(), file=file or sys.stdout)

    def save_data_to_tsv(self, file: IO[str] | str) -> None:
        self._table().to_csv(file, sep="\t", index=False)

    def find_total_for_module(self, module_name: str) -> float:
        """Sum of ``avg`` over non-OPERATOR_CALL events whose module hierarchy names
        ``module_name``."""
        total = 0.0
        for block in self.event_blocks:
            for ev in block.events:
                if ev.name == OPERATOR_CALL or ev.perf_data is None:
                    continue
                if any(module_name in key for key in _hierarchy_keys(ev.module_hierarchy)):
                    total += ev.perf_data.avg
        return total

    def get_exported_program(self, graph: str | None = None):
        if self._etrecord is None:
            raise InspectorError("no ETRecord was given; pass etrecord= to the Inspector")
        if graph is None:
            return self._etrecord.edge_dialect_program
        return (self._etrecord.graph_map or {})[graph]

    def calculate_numeric_gap(self, distance: str = "MSE",
                              disable_debug_handle_valdiation: bool = False,
                              reference_graph: str | None = None):
        from ._numeric_gap import numeric_gap
        return numeric_gap(self, distance, reference_graph)


def _columns(u: str) -> list[str]:
    return ["event_block_name", "event_name", "raw", f"p10{u}", f"p50{u}", f"p90{u}",
            f"avg{u}", f"min{u}", f"max{u}", "op_types", "delegate_debug_identifier",
            "stack_traces", "module_hierarchy", "is_delegated_op", "delegate_backend_name",
            "debug_data", "start_time"]


def _hierarchy_keys(hierarchy: dict[str, Any]) -> list[str]:
    keys = []
    for stack in hierarchy.values():
        if isinstance(stack, dict):
            for k, v in stack.items():
                keys.append(str(k))
                if isinstance(v, (tuple, list)) and v:
                    keys.append(str(v[0]))
    return keys


def _signature(run: R.RawRun) -> tuple:
    return (run.name, run.bundled_input_index, tuple(
        (e.name, e.chain_index, e.instruction_id, e.delegate_debug_id_int, e.delegate_debug_id_str)
        for e in run.events if isinstance(e, R.RawProfile)))


def _same_values(a: R.RawRun, b: R.RawRun) -> bool:
    """Whether two runs logged the same values (runs with other inputs stay apart)."""
    da = [e.value for e in a.events if isinstance(e, R.RawDebug)]
    db = [e.value for e in b.events if isinstance(e, R.RawDebug)]
    if len(da) != len(db):
        return False
    return all(_equal(x, y) for x, y in zip(da, db))


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_equal(p, q) for p, q in zip(x, y))
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return x.shape == y.shape and x.dtype == y.dtype and bool(np.array_equal(x, y))
    return x is y or x == y
