"""Runs to event blocks, grouped as ExecuTorch 1.5.1's Inspector groups them.

Within a run, profile and debug events are gathered per instruction (instruction id, chain,
delegate ids); every profile event of an instruction becomes an ``Event`` that carries all of
the instruction's logged values (so ``native_call_relu.out`` and its ``OPERATOR_CALL`` both
hold relu's output), and an instruction that logged values but no profile event becomes an
``Event`` of its own. Runs that logged the same events form one block with one duration per
run. Where ExecuTorch stops with an assertion (same events, different values), the runs here
become separate blocks ``Execute``, ``Execute_1``, ...
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import FormatError
from . import _runs as R
from ._event import Event, EventBlock, PerfData, TimeScale, time_scale_factor

_UINT32_MAX = 2**32 - 1


@dataclass
class _Instruction:
    profiles: list[R.RawProfile] = field(default_factory=list)
    debugs: list[R.RawDebug] = field(default_factory=list)


def _key(e: R.RawProfile | R.RawDebug) -> tuple:
    return (e.instruction_id, e.chain_index, e.delegate_debug_id_int, e.delegate_debug_id_str)


def _signature(e: R.RawProfile | R.RawDebug | None, name: str | None) -> tuple | None:
    """(name, instruction, delegate int, delegate str) with "unset" values as None."""
    if e is None:
        return None
    return (name or "", e.instruction_id if e.instruction_id != -1 else None,
            e.delegate_debug_id_int if e.delegate_debug_id_int != -1 else None,
            e.delegate_debug_id_str if e.delegate_debug_id_str != "" else None)


def _run_events(run: R.RawRun) -> dict[tuple, tuple[R.RawProfile | None, list[R.RawDebug]]]:
    """Event signature -> (its profile event, the instruction's logged values), in order."""
    instructions: dict[tuple, _Instruction] = {}
    for e in run.events:
        if isinstance(e, R.RawDebug) and e.output:
            continue
        inst = instructions.setdefault(_key(e), _Instruction())
        (inst.profiles if isinstance(e, R.RawProfile) else inst.debugs).append(e)
    out: dict[tuple, tuple[R.RawProfile | None, list[R.RawDebug]]] = {}
    for key, inst in instructions.items():
        debug_sig = _signature(inst.debugs[0], None) if inst.debugs else None
        if not inst.profiles:
            out[(key[0], None, debug_sig)] = (None, inst.debugs)
        for p in inst.profiles:
            out[(key[0], _signature(p, p.name), debug_sig)] = (p, inst.debugs)
    return out


@dataclass
class _Group:
    name: str
    signature: tuple
    bundled_input_index: int
    events: dict[tuple, list[tuple[R.RawProfile | None, list[R.RawDebug]]]]
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
        signature = (run.name, tuple(events), run.bundled_input_index)
        outputs = [d.value for d in run.events if isinstance(d, R.RawDebug) and d.output]
        key = (signature, _values_key(events, outputs))
        g = groups.get(key)
        if g is not None:
            for sig, pair in events.items():
                g.events[sig].append(pair)
        else:
            groups[key] = _Group(run.name, signature, run.bundled_input_index,
                                 {sig: [pair] for sig, pair in events.items()}, outputs)
    blocks = []
    seen: dict[tuple, int] = {}
    for g in groups.values():
        n = seen.get(g.signature, 0)
        seen[g.signature] = n + 1
        events = [_event(sig, pairs, options) for sig, pairs in g.events.items()]
        blocks.append(EventBlock(g.name if n == 0 else f"{g.name}_{n}", events, options.source,
                                 options.target, g.bundled_input_index,
                                 [_as_torch(v) for v in g.run_output]))
    return blocks


def _event(sig: tuple, pairs: list[tuple[R.RawProfile | None, list[R.RawDebug]]],
           options: BlockOptions) -> Event:
    instruction_id, profile_sig, debug_sig = sig
    event = Event(name="", _instruction_id=instruction_id,
                  _delegate_metadata_parser=options.metadata_parser,
                  _delegate_time_scale_converter=options.time_converter)
    _name(event, profile_sig)
    profiles = [p for p, _ in pairs if p is not None]
    if profiles:
        factor = time_scale_factor(options.source, options.target)
        event.perf_data = PerfData([_duration(event, p, factor) for p in profiles])
        event._start_time = [p.start_time for p in profiles]
        metadata = [p.metadata or "" for p in profiles]
        if any(metadata):
            event._delegate_debug_metadatas = metadata
    _name(event, debug_sig)
    event.debug_data = [_as_torch(d.value) for d in pairs[0][1]]
    return event


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


def _name(event: Event, sig: tuple | None) -> None:
    """Name and delegate fields from a signature; a delegate's id names its events."""
    if sig is None:
        return
    name, _, delegate_int, delegate_str = sig
    identifier = delegate_int if delegate_int is not None else (delegate_str or None)
    delegated = identifier is not None
    name = str(identifier) if delegated else name
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


def _duration(event: Event, p: R.RawProfile, factor: float) -> float:
    converter = event._delegate_time_scale_converter
    if event.is_delegated_op and converter is not None:
        # ExecuTorch converts a delegate's start and end times with the user's function.
        return _elapsed(converter(event.name, p.start_time), converter(event.name, p.end_time))
    # Subtract the integer ticks first (exact), then scale.
    return float(_elapsed(p.start_time, p.end_time)) / factor


def _values_key(events: dict, outputs: list[Any]) -> tuple:
    """A run's logged values as a hashable key: equal keys for runs whose values are equal."""
    return (_value_key(outputs),
            tuple(_value_key([d.value for d in debugs]) for _, debugs in events.values()))


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
    return ("object", id(x))  # the MISSING marker (no debug buffer)
