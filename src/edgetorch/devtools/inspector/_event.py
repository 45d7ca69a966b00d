"""The Inspector's records (``executorch.devtools.inspector``): ``PerfData``, ``Event`` and
``EventBlock``, with ExecuTorch 1.5.1's fields, properties and DataFrame columns."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any


class TimeScale(str, Enum):
    NS = "ns"
    US = "us"
    MS = "ms"
    S = "s"
    CYCLES = "cycles"


# Ticks per second of each scale (cycles only ever convert to cycles).
TICKS_PER_SECOND = {TimeScale.NS: 1e9, TimeScale.US: 1e6, TimeScale.MS: 1e3, TimeScale.S: 1.0,
                    TimeScale.CYCLES: 1.0}

OPERATOR_CALL = "OPERATOR_CALL"
DELEGATE_CALL = "DELEGATE_CALL"
FRAMEWORK_EVENTS = ("Method::init", "Program::load_method", "Method::execute")


def time_scale_factor(source: TimeScale, target: TimeScale) -> float:
    """Source ticks per target tick (ExecuTorch's ``calculate_time_scale_factor``)."""
    return TICKS_PER_SECOND[TimeScale(source)] / TICKS_PER_SECOND[TimeScale(target)]


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
