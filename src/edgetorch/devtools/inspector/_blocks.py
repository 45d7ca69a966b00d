"""Runs to event blocks, grouped as ExecuTorch 1.5.1's Inspector groups them, with its record
types (``InstructionEvent``, the ``*Signature`` dataclasses, ``DelegateMetadata``).

Within a run, profile and debug events are gathered per instruction (instruction id, chain,
delegate ids: an ``InstructionEvent``); every profile event of an instruction becomes an
``Event`` that carries all of the instruction's logged values (so ``native_call_relu.out`` and
its ``OPERATOR_CALL`` both hold relu's output), and an instruction that logged values but no
profile event becomes an ``Event`` of its own. Runs that logged the same events form one block
with one duration per run. Where ExecuTorch stops with an assertion (same events, different
values), the runs here become separate blocks ``Execute``, ``Execute_1``, ...
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from ...errors import FormatError
from ...schema import etdump as E
from . import _runs as R
from ._event import Event, EventBlock, PerfData
from ._inspector_utils import DebugHandle, TimeScale, calculate_time_scale_factor

_UINT32_MAX = 2**32 - 1


@dataclass(frozen=True, order=True)
class InstructionEventSignature:
    """Which instruction (and which step inside a delegate) an ETDump event belongs to."""

    instruction_id: int
    chain_index: int
    delegate_id: int | None = None
    delegate_id_str: str | None = None


@dataclass
class InstructionEvent:
    """The profile and debug events one run logged for one instruction."""

    signature: InstructionEventSignature
    profile_events: list[Any] | None = None  # R.RawProfile or ETDump ProfileEvent
    debug_events: list[Any] | None = None  # R.RawDebug (program outputs left out)

    @staticmethod
    def gen_from_events(run_events: Sequence[Any]) -> list[InstructionEvent]:
        """A run's events (ETDump ``Event``s or the Inspector's records) per instruction, in
        the order the instructions first logged; program outputs are not instructions'."""
        out: dict[InstructionEventSignature, InstructionEvent] = {}
        for e in run_events:
            if isinstance(e, E.Event):
                populated = e.profile_event or e.debug_event
                if populated is None:  # an allocation event
                    continue
                e = R.raw_event(populated)
            if isinstance(e, R.RawDebug) and e.output:
                continue
            sig = InstructionEventSignature(e.instruction_id, e.chain_index,
                                            e.delegate_debug_id_int, e.delegate_debug_id_str)
            inst = out.setdefault(sig, InstructionEvent(sig))
            if isinstance(e, R.RawDebug):
                inst.debug_events = (inst.debug_events or []) + [e]
            else:
                inst.profile_events = (inst.profile_events or []) + [e]
        return list(out.values())


def _unset_to_none(e: Any) -> tuple[int | None, int | None, str | None]:
    """(instruction, delegate int id, delegate str id) with the ETDump's "unset" values (-1,
    "") as None."""
    return (e.instruction_id if e.instruction_id != -1 else None,
            e.delegate_debug_id_int if e.delegate_debug_id_int != -1 else None,
            e.delegate_debug_id_str if e.delegate_debug_id_str != "" else None)


@dataclass(frozen=True, order=True)
class ProfileEventSignature:
    name: str
    instruction_id: int | None
    delegate_id: int | None = None
    delegate_id_str: str | None = None

    @staticmethod
    def _gen_from_event(event: Any) -> ProfileEventSignature:
        return ProfileEventSignature(event.name or "", *_unset_to_none(event))


@dataclass(frozen=True, order=True)
class DebugEventSignature:
    name: str = ""
    instruction_id: int | None = -1
    delegate_id: int | None = None
    delegate_id_str: str | None = None

    @staticmethod
    def _gen_from_event(event: Any) -> DebugEventSignature:
        return DebugEventSignature(event.name or "", *_unset_to_none(event))


@dataclass(frozen=True, order=True)
class EventSignature:
    """One ``Event`` of a run: its instruction, its profile event and its logged values."""

    instruction_id: int
    profile_event_signature: ProfileEventSignature | None = None
    debug_event_signature: DebugEventSignature | None = None

    @staticmethod
    def gen_from_instruction_event(instruction_event: InstructionEvent
                                   ) -> list[tuple[EventSignature, InstructionEvent]]:
        """One signature per profile event of the instruction (each paired with the
        instruction's events narrowed to that profile event), or one for its values alone."""
        debugs = instruction_event.debug_events
        debug_sig = DebugEventSignature._gen_from_event(debugs[0]) if debugs else None
        instruction = instruction_event.signature.instruction_id
        if instruction_event.profile_events is None:
            return [(EventSignature(instruction, None, debug_sig), instruction_event)]
        return [(EventSignature(instruction, ProfileEventSignature._gen_from_event(p), debug_sig),
                 dataclasses.replace(instruction_event, profile_events=[p]))
                for p in instruction_event.profile_events]


@dataclass(frozen=True, order=True)
class RunSignature:
    name: str
    events: tuple[EventSignature, ...] | None = None
    bundled_input_index: int | None = None


class DelegateMetadata(TypedDict):
    """A ``delegate_map`` entry of the ETRecord: the backend's name and its own
    {delegate debug identifier: debug handles} map."""

    name: str
    delegate_map: Mapping[int, DebugHandle] | Mapping[str, DebugHandle]


def _run_events(run: R.RawRun) -> dict[EventSignature, InstructionEvent]:
    """The run's events by signature, in order."""
    return {sig: inst for ie in InstructionEvent.gen_from_events(run.events)
            for sig, inst in EventSignature.gen_from_instruction_event(ie)}


@dataclass
class _Group:
    name: str
    signature: RunSignature
    events: dict[EventSignature, list[InstructionEvent]]
    run_output: list[Any]


@dataclass
class BlockOptions:
    source: TimeScale = TimeScale.NS
    target: TimeScale = TimeScale.MS
    metadata_parser: Callable[[list[Any]], Any] | None = None
    time_converter: Callable[[Any, Any], Any] | None = None


def build_blocks(runs: list[R.RawRun], options: BlockOptions) -> list[EventBlock]:
    # Runs with the same events and the same logged values are repeats of one group; keyed by
    # a digest of both, so grouping stays linear however many runs a (hostile) file holds.
    groups: dict[tuple, _Group] = {}
    for run in runs:
        events = _run_events(run)
        signature = RunSignature(run.name, tuple(events), run.bundled_input_index)
        outputs = [d.value for d in run.events if isinstance(d, R.RawDebug) and d.output]
        key = (signature, _values_key(events, outputs))
        g = groups.get(key)
        if g is not None:
            for sig, inst in events.items():
                g.events[sig].append(inst)
        else:
            groups[key] = _Group(run.name, signature,
                                 {sig: [inst] for sig, inst in events.items()}, outputs)
    blocks = []
    seen: dict[RunSignature, int] = {}
    factor = calculate_time_scale_factor(options.source, options.target)
    for g in groups.values():
        n = seen.get(g.signature, 0)
        seen[g.signature] = n + 1
        events = [event_from_instruction_events(sig, insts, factor, options.metadata_parser,
                                                options.time_converter)
                  for sig, insts in g.events.items()]
        blocks.append(EventBlock(g.name if n == 0 else f"{g.name}_{n}", events, options.source,
                                 options.target, g.signature.bundled_input_index,
                                 [_as_torch(v) for v in g.run_output]))
    return blocks


def event_from_instruction_events(
        sig: EventSignature, instruction_events: list[InstructionEvent], factor: float = 1.0,
        metadata_parser: Callable[[list[Any]], Any] | None = None,
        time_converter: Callable[[Any, Any], Any] | None = None, buffer: Any = None) -> Event:
    """The ``Event`` of one signature over the runs of a block: a duration per run (in source
    ticks divided by ``factor``), and the values logged (``buffer``: the debug buffer, for
    ETDump debug events whose tensors are not read yet)."""
    event = Event(name="", _instruction_id=sig.instruction_id,
                  _delegate_metadata_parser=metadata_parser,
                  _delegate_time_scale_converter=time_converter)
    populate_profiling(event, sig.profile_event_signature, instruction_events, factor)
    populate_debugging(event, sig.debug_event_signature, instruction_events, buffer)
    return event


def populate_profiling(event: Event, sig: ProfileEventSignature | None,
                       instruction_events: list[InstructionEvent], factor: float) -> None:
    """Name, delegate fields, a duration and start time per run, delegate metadata."""
    _name(event, sig)
    profiles = []
    for inst in instruction_events:
        if inst.profile_events is None:
            continue
        if len(inst.profile_events) != 1:
            raise ValueError(f"an Event is made of one profile event per run, got "
                             f"{len(inst.profile_events)}; split the InstructionEvent with "
                             "EventSignature.gen_from_instruction_event")
        profiles.append(inst.profile_events[0])
    if profiles:
        event.perf_data = PerfData([_duration(event, p, factor) for p in profiles])
        event._start_time = [p.start_time for p in profiles]
        metadata = [p.delegate_debug_metadata or "" for p in profiles]
        if any(metadata):
            event._delegate_debug_metadatas = metadata


def populate_debugging(event: Event, sig: DebugEventSignature | None,
                       instruction_events: list[InstructionEvent], buffer: Any = None) -> None:
    """Name and delegate fields, and the values the runs logged (equal in every run: blocks
    are grouped by value)."""
    _name(event, sig)
    runs = [[_logged_value(d, buffer) for d in inst.debug_events]
            for inst in instruction_events if inst.debug_events]
    # Equal as build_blocks groups them (NaN by its bytes, -0.0 as 0.0).
    first = _value_key(runs[0]) if runs else None
    for other in runs[1:]:
        if _value_key(other) != first:
            raise AssertionError(f"event {event.name!r} logged different values in different "
                                 "runs of one block; group runs with build_blocks")
    event.debug_data = [_as_torch(v) for v in runs[0]] if runs else []


def _logged_value(d: Any, buffer: Any) -> Any:
    if isinstance(d, R.RawDebug):
        return d.value
    return R.raw_event(d, buffer).value  # an ETDump DebugEvent (Missing tensors if no buffer)


def _as_torch(value: Any) -> Any:
    """Logged tensors as torch tensors, as ExecuTorch's Inspector gives them (NumPy arrays
    when torch is not installed)."""
    if isinstance(value, list):
        return [_as_torch(v) for v in value]
    if isinstance(value, np.ndarray):
        try:
            import torch
        except ImportError:
            return value
        return torch.from_numpy(value)
    return value


def _name(event: Event, sig: ProfileEventSignature | DebugEventSignature | None) -> None:
    """Name and delegate fields from a signature; a delegate's id names its events."""
    if sig is None:
        return
    identifier = sig.delegate_id if sig.delegate_id is not None else (sig.delegate_id_str or None)
    delegated = identifier is not None
    name = str(identifier) if delegated else sig.name
    if name:
        event.name = name
    event.delegate_debug_identifier = identifier
    event.is_delegated_op = delegated


def _elapsed(start: float, end: float) -> float:
    if start <= end:
        return end - start
    # A 32-bit tick counter that wrapped between start and end.
    if start > _UINT32_MAX or end > _UINT32_MAX:
        raise FormatError(f"an event ends ({end}) before it starts ({start}) and the times do "
                         "not fit 32 bits, so it is not a counter wrap-around; the ETDump's "
                         "times are corrupt")
    return (_UINT32_MAX - start) + end


def _duration(event: Event, p: Any, factor: float) -> float:
    converter = event._delegate_time_scale_converter
    if event.is_delegated_op and converter is not None:
        # ExecuTorch converts a delegate's start and end times with the user's function.
        return _elapsed(converter(event.name, p.start_time), converter(event.name, p.end_time))
    # Subtract the integer ticks first (exact), then scale.
    return float(_elapsed(p.start_time, p.end_time)) / factor


def _values_key(events: dict[EventSignature, InstructionEvent], outputs: list[Any]) -> tuple:
    """A run's logged values as a hashable key: equal keys for runs whose values are equal."""
    return (_value_key(outputs),
            tuple(_value_key([d.value for d in inst.debug_events or []])
                  for inst in events.values()))


def _value_key(x: Any) -> Any:
    if isinstance(x, list):
        return ("list", tuple(_value_key(v) for v in x))
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "fc":
            x = x + x.dtype.type(0)  # -0.0 becomes 0.0: equal values, equal bytes
        digest = hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=16).digest()
        return ("array", x.dtype.str, x.shape, digest)
    if isinstance(x, float) and x != x:  # NaN: grouped by its bytes, as arrays are
        return ("nan",)
    if isinstance(x, (int, float, bool, str, type(None))):
        return (type(x).__name__, x)
    if isinstance(x, R.Missing):  # no debug buffer: the logged shape still tells runs apart
        return ("missing", x.sizes, x.scalar_type)
    return ("object", id(x))
