"""The Inspector's records (``executorch.devtools.inspector``): ``PerfData``, ``Event`` and
``EventBlock``, with ExecuTorch 1.5.1's fields, properties and DataFrame columns."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ._inspector_utils import RESERVED_FRAMEWORK_EVENT_NAMES, TimeScale

log = logging.getLogger(__name__)

OPERATOR_CALL = "OPERATOR_CALL"
DELEGATE_CALL = "DELEGATE_CALL"
FRAMEWORK_EVENTS = tuple(RESERVED_FRAMEWORK_EVENT_NAMES)


class PerfData:
    """Durations of one event over the runs of its block, in the target time scale."""

    def __init__(self, raw: list[float]) -> None:
        self.raw: list[float] = raw

    def __repr__(self) -> str:
        return f"PerfData(raw={self.raw!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PerfData) and self.raw == other.raw

    def _pct(self, q: float) -> float:
        import numpy as np

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
        return float(statistics.fmean(self.raw))

    @property
    def min(self) -> float:
        return float(min(self.raw))

    @property
    def max(self) -> float:
        return float(max(self.raw))


@dataclass
class Event:
    """One operator (or framework step, or delegate-internal step) as the runtime logged it,
    joined with what the ETRecord says about its debug handles."""

    name: str
    perf_data: PerfData | None = None
    op_types: list[str] = field(default_factory=list)
    delegate_debug_identifier: int | str | None = None
    debug_handles: int | Sequence[int] | None = None
    num_outputs: int = 1
    stack_traces: dict[str, Any] = field(default_factory=dict)
    module_hierarchy: dict[str, Any] = field(default_factory=dict)
    is_delegated_op: bool | None = None
    delegate_backend_name: str | None = None
    _delegate_debug_metadatas: list[Any] = field(default_factory=list)
    debug_data: list[Any] = field(default_factory=list)
    _instruction_id: int | None = None
    _delegate_metadata_parser: Callable[[list[Any]], Any] | None = None
    _delegate_time_scale_converter: Callable[[Any, Any], Any] | None = None
    _start_time: list[int | float] | None = None

    @cached_property
    def delegate_debug_metadatas(self) -> list[Any] | dict[str, Any]:
        """The delegate's metadata per run, parsed by ``delegate_metadata_parser`` if given."""
        if not self.is_delegated_op or self._delegate_metadata_parser is None:
            return self._delegate_debug_metadatas
        return self._delegate_metadata_parser(self._delegate_debug_metadatas)

    @property
    def raw_delegate_debug_metadatas(self) -> list[Any]:
        return self._delegate_debug_metadatas

    @property
    def start_time(self) -> list[int | float] | None:
        return self._start_time

    def asdict(self, _units: str = "") -> dict[str, Any]:
        p = self.perf_data
        ops = self.op_types
        if len(ops) >= 5:  # ExecuTorch's table shortens long op lists the same way
            ops = f"['{ops[0]}', '{ops[1]}' ... '{ops[-1]}'] ({len(ops)} total)"
        return {
            "event_name": self.name,
            "raw": [p.raw if p else None],
            "p10" + _units: p.p10 if p else None,
            "p50" + _units: p.p50 if p else None,
            "p90" + _units: p.p90 if p else None,
            "avg" + _units: p.avg if p else None,
            "min" + _units: p.min if p else None,
            "max" + _units: p.max if p else None,
            "op_types": [ops],
            "delegate_debug_identifier": self.delegate_debug_identifier,
            "stack_traces": [self.stack_traces],
            "module_hierarchy": [self.module_hierarchy],
            "is_delegated_op": self.is_delegated_op,
            "delegate_backend_name": self.delegate_backend_name,
            "debug_data": [self.debug_data],
            "start_time": [self._start_time],
        }

    def to_dataframe(self, _units: str = ""):
        import pandas as pd

        return pd.DataFrame(self.asdict(_units=_units))

    @staticmethod
    def _gen_from_inference_events(signature: Any, events: list[Any], scale_factor: float = 1.0,
                                   output_buffer: Any = None,
                                   delegate_metadata_parser: Callable[[list[Any]], Any] | None
                                   = None,
                                   delegate_time_scale_converter: Callable[[Any, Any], Any] | None
                                   = None) -> Event:
        """The Event of an ``EventSignature`` from its ``InstructionEvent`` in each run
        (durations divided by ``scale_factor``; logged tensors read from ``output_buffer``)."""
        from ._blocks import event_from_instruction_events

        return event_from_instruction_events(signature, events, scale_factor,
                                             delegate_metadata_parser,
                                             delegate_time_scale_converter, output_buffer)

    @staticmethod
    def _populate_profiling_related_fields(ret_event: Event, profile_event_signature: Any,
                                           events: list[Any], scale_factor: float) -> None:
        from ._blocks import populate_profiling

        populate_profiling(ret_event, profile_event_signature, events, scale_factor)

    @staticmethod
    def _populate_debugging_related_fields(ret_event: Event, debug_event_signature: Any,
                                           events: list[Any], output_buffer: Any = None) -> None:
        from ._blocks import populate_debugging

        populate_debugging(ret_event, debug_event_signature, events, output_buffer)

    def _associate_with_op_graph_nodes(self, debug_handle_to_op_node_map: Mapping[Any, list[Any]]
                                       ) -> None:
        """Op types, stack traces and module hierarchy of the operator nodes (``OperatorNode``)
        that carry the event's debug handles."""
        if self.name in FRAMEWORK_EVENTS or self.debug_handles is None:
            return
        handles = self.debug_handles
        for handle in [handles] if isinstance(handles, int) else handles:
            for node in debug_handle_to_op_node_map.get(handle, []):
                metadata = node.metadata or {}
                if node.name not in self.stack_traces:
                    self.stack_traces[node.name] = metadata.get("stack_trace")
                    self.module_hierarchy[node.name] = metadata.get("nn_module_stack")
                self.op_types.append(node.op)

    def _resolve_debug_handles(self, handle_map: Mapping[str, Any],
                               delegate_map: Mapping[str, Any] | None,
                               num_outs_map: Mapping[str, int] | None) -> None:
        """Debug handles, output count and delegate backend from the ETRecord's maps (keyed by
        the instruction id as a string; a delegate's own map by its debug identifier)."""
        if self._instruction_id is None:
            return
        instruction = str(self._instruction_id)
        if instruction not in handle_map:
            return
        self.num_outputs = int((num_outs_map or {}).get(instruction, 1))
        delegate = (delegate_map or {}).get(instruction)
        if self.delegate_debug_identifier is None:
            self.debug_handles = handle_map[instruction]
            if self.name == DELEGATE_CALL and delegate is not None:
                self.delegate_backend_name = delegate.get("name", "")
            return
        if delegate is None:
            self.debug_handles = handle_map[instruction]
            log.warning("no delegate mapping found for the delegate at instruction %s",
                        instruction)
            return
        self.delegate_backend_name = delegate.get("name", "")
        inner = delegate.get("delegate_map") or {}
        identifier = self.delegate_debug_identifier
        handles = inner.get(identifier)
        if handles is None:
            handles = inner.get(str(identifier))
            # ExecuTorch also accepts a map key that is part of the identifier string.
            for key, value in inner.items():
                if str(key) in str(identifier):
                    handles = value
        self.debug_handles = handles


@dataclass
class EventBlock:
    """The events of one kind of run (load, or executes that logged the same events)."""

    name: str
    events: list[Event] = field(default_factory=list)
    source_time_scale: TimeScale = TimeScale.NS
    target_time_scale: TimeScale = TimeScale.MS
    bundled_input_index: int | None = None
    run_output: list[Any] | None = None
    reference_output: list[Any] | None = None

    def to_dataframe(self, include_units: bool = False,
                     include_delegate_debug_data: bool = False):
        """One row per event (ExecuTorch's 17 columns; OPERATOR_CALL rows included)."""
        import pandas as pd

        units = f" ({TimeScale(self.target_time_scale).value})" if include_units else ""
        rows = [{k: (v[0] if isinstance(v, list) else v) for k, v in e.asdict(units).items()}
                for e in self.events]
        df = pd.DataFrame(rows, columns=_columns(units))
        df.insert(0, "event_block_name", [self.name] * len(rows), allow_duplicates=True)
        if include_delegate_debug_data:
            extra = [_metadata_row(e) for e in self.events]
            if any(extra):
                df = pd.concat([df, pd.DataFrame(extra)], axis=1)
        return df

    @staticmethod
    def _gen_from_etdump(etdump: Any, source_time_scale: TimeScale = TimeScale.NS,
                         target_time_scale: TimeScale = TimeScale.MS, output_buffer: Any = None,
                         delegate_metadata_parser: Callable[[list[Any]], Any] | None = None,
                         delegate_time_scale_converter: Callable[[Any, Any], Any] | None = None
                         ) -> list[EventBlock]:
        """The blocks of an ETDump (``ETDumpFlatCC``), its tensors read from ``output_buffer``."""
        from . import _runs as R
        from ._blocks import BlockOptions, build_blocks

        return build_blocks(R.runs_from_etdump(etdump, output_buffer), BlockOptions(
            source_time_scale, target_time_scale, delegate_metadata_parser,
            delegate_time_scale_converter))

    def _gen_resolve_debug_handles(self, handle_map: Mapping[str, Any],
                                   delegate_map: Mapping[str, Any] | None = None,
                                   instruction_id_to_num_outs_map: Mapping[str, int] | None = None
                                   ) -> None:
        """Give every event its debug handles from the ETRecord's maps."""
        for event in self.events:
            event._resolve_debug_handles(handle_map, delegate_map, instruction_id_to_num_outs_map)


def _columns(u: str) -> list[str]:
    """The columns of ``Event.asdict``, in its order."""
    return ["event_name", "raw", f"p10{u}", f"p50{u}", f"p90{u}", f"avg{u}", f"min{u}",
            f"max{u}", "op_types", "delegate_debug_identifier", "stack_traces",
            "module_hierarchy", "is_delegated_op", "delegate_backend_name", "debug_data",
            "start_time"]


def _metadata_row(event: Event) -> dict[str, Any]:
    metadata = event.delegate_debug_metadatas
    if not metadata:
        return {}
    if isinstance(metadata, list):
        return {"delegate_debug_metadata": metadata}
    if isinstance(metadata, dict):
        return dict(metadata)
    raise TypeError(f"delegate_metadata_parser returned {type(metadata).__name__}; it must "
                    "return a list or a dict")
