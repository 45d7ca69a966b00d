"""The event tracer: what a run reports for profiling and debugging (ExecuTorch's
``EventTracer``), and :class:`RecordingEventTracer`, which keeps every event in memory.

The events mirror what ExecuTorch's runtime writes into an ETDump, so that one can be written
from them: a ``"Default"`` run block with ``Method::init`` and ``Program::load_method``, then per
``execute`` an ``"Execute"`` block with, per kernel instruction, its outputs (debug events,
when intermediate outputs are captured), ``native_call_<op>.<overload>`` and ``OPERATOR_CALL``;
per delegate instruction, the delegate's own events, its arguments and ``DELEGATE_CALL``; then
``Method::execute`` and the program outputs. Profile events are appended when they end, as
ExecuTorch writes them, so an inner event comes before the one around it.

A method compiled without a tracer pays nothing: ``Method`` chooses its traced loop at load
time only when the program has a tracer. Backends get the tracer through their
``BackendExecutionContext.event_tracer`` and report with the ``event_tracer_*`` functions
below, which accept ``None``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

UNSET_CHAIN_ID = -1  # ExecuTorch's kUnsetChainId: framework events (Method::execute, ...)
UNSET_DEBUG_HANDLE = 0  # kUnsetDebugHandle: the instruction id of framework events
UNSET_DELEGATE_ID = -1  # kUnsetDelegateDebugIntId
_ALIGN = 64  # ExecuTorch's debug buffer places each tensor at a 64-byte boundary


def now_ns() -> int:
    """The tracer's clock, in nanoseconds (ExecuTorch's ``pal_current_ticks`` on Linux)."""
    return time.perf_counter_ns()


@dataclass
class ProfileEvent:
    """A timed span (ETDump ``ProfileEvent``). ``instruction_id`` is the instruction index in
    the chain (the key of ``debug_handle_map``). Delegate events carry the delegate's own
    identifier (an int or a string) and, when the backend knows it, ``debug_handle``: the
    Edge node the delegate-internal work came from."""

    name: str | None
    chain_index: int
    instruction_id: int
    start_time: int
    end_time: int
    delegate_debug_id_int: int = UNSET_DELEGATE_ID
    delegate_debug_id_str: str | None = None
    delegate_debug_metadata: bytes | None = None
    debug_handle: int | None = None


@dataclass
class DebugEvent:
    """A value seen during the run (ETDump ``DebugEvent``): a kernel's output, a delegate
    argument, a delegate-internal intermediate or (``output=True``) a program output.
    ``value`` is a copy: a NumPy array, a list of arrays, or a scalar."""

    chain_index: int
    instruction_id: int
    value: Any
    name: str | None = None
    delegate_debug_id_int: int = UNSET_DELEGATE_ID
    delegate_debug_id_str: str | None = None
    output: bool = False


@dataclass
class RunBlock:
    """One ETDump ``RunData``: ``"Default"`` (loading) or ``"Execute"`` (one per execute)."""

    name: str
    events: list[ProfileEvent | DebugEvent] = field(default_factory=list)
    bundled_input_index: int = -1


class EventTracer:
    """The interface the runtime and backends report to. Subclass it to stream events
    elsewhere; :class:`RecordingEventTracer` keeps them.

    ``chain_index``/``instruction_id`` are the instruction the method is running; the method
    sets them before each instruction so that a backend's events land on its DELEGATE_CALL.
    ``log_intermediate_outputs`` says whether values (debug events) are wanted at all.
    """

    log_intermediate_outputs: bool = False
    # Ask delegates that can (XNNPACK: each node's output, raw: int8 and channels-last as the
    # node computed it) for their intermediate values too. Off by default: ExecuTorch's
    # delegates log none, and the Inspector's numeric gap reads delegate calls as ExecuTorch's.
    delegate_intermediate_outputs: bool = False

    def __init__(self) -> None:
        self.chain_index = UNSET_CHAIN_ID
        self.instruction_id = UNSET_DEBUG_HANDLE

    def create_event_block(self, name: str, bundled_input_index: int = -1) -> None:
        """Start a new run block; later events go into it."""

    def set_instruction(self, chain_index: int, instruction_id: int) -> None:
        self.chain_index, self.instruction_id = chain_index, instruction_id

    def log_profiling(self, name: str, chain_index: int, instruction_id: int,
                      start_time: int, end_time: int) -> None:
        """A framework or operator span that ended now."""

    def log_profiling_delegate(self, name: str | None, delegate_debug_id: int | str | None,
                               start_time: int, end_time: int, metadata: bytes | None = None,
                               debug_handle: int | None = None) -> None:
        """A span inside a delegate, on the current instruction."""

    def log_evalue(self, value: Any, output: bool = False, chain_index: int | None = None,
                   instruction_id: int | None = None) -> None:
        """A value on the current instruction (or the given one)."""

    def log_intermediate_output_delegate(self, name: str | None,
                                         delegate_debug_id: int | str | None,
                                         value: Any) -> None:
        """A value computed inside a delegate, on the current instruction."""


class RecordingEventTracer(EventTracer):
    """Keeps every event in :attr:`run_blocks`. ``debug_buffer_size`` > 0 captures values
    (ExecuTorch's intermediate-output level) up to that many bytes, each tensor counted at a
    64-byte boundary as ExecuTorch's debug buffer stores it; past that, values are dropped
    and :attr:`debug_buffer_overflowed` is set (ExecuTorch logs "Ran out of space").
    ``delegate_intermediate_outputs=True`` (with a debug buffer) also keeps the values
    delegates compute inside themselves (see :class:`EventTracer`)."""

    def __init__(self, debug_buffer_size: int = 0,
                 delegate_intermediate_outputs: bool = False) -> None:
        super().__init__()
        self.debug_buffer_size = int(debug_buffer_size)
        self.log_intermediate_outputs = self.debug_buffer_size > 0
        self.delegate_intermediate_outputs = bool(delegate_intermediate_outputs)
        self.debug_buffer_used = 0
        self.debug_buffer_overflowed = False
        self.run_blocks: list[RunBlock] = []

    # ---- blocks ---------------------------------------------------------------------------

    def create_event_block(self, name: str, bundled_input_index: int = -1) -> None:
        self.run_blocks.append(RunBlock(name, bundled_input_index=bundled_input_index))

    def _events(self) -> list[ProfileEvent | DebugEvent]:
        if not self.run_blocks:  # events before any block go to "Default", as in ExecuTorch
            self.create_event_block("Default")
        return self.run_blocks[-1].events

    # ---- profiling ------------------------------------------------------------------------

    def log_profiling(self, name: str, chain_index: int, instruction_id: int,
                      start_time: int, end_time: int) -> None:
        self._events().append(ProfileEvent(name, chain_index, instruction_id, start_time, end_time))

    def log_profiling_delegate(self, name: str | None, delegate_debug_id: int | str | None,
                               start_time: int, end_time: int, metadata: bytes | None = None,
                               debug_handle: int | None = None) -> None:
        id_int, id_str = _delegate_ids(delegate_debug_id)
        self._events().append(ProfileEvent(
            name, self.chain_index, self.instruction_id, start_time, end_time, id_int, id_str,
            metadata, debug_handle))

    # ---- values ---------------------------------------------------------------------------

    def log_evalue(self, value: Any, output: bool = False, chain_index: int | None = None,
                   instruction_id: int | None = None) -> None:
        if not self.log_intermediate_outputs:
            return
        copied = self._copy(value)
        if copied is _DROPPED:
            return
        self._events().append(DebugEvent(
            self.chain_index if chain_index is None else chain_index,
            self.instruction_id if instruction_id is None else instruction_id,
            copied, output=output))

    def log_intermediate_output_delegate(self, name: str | None,
                                         delegate_debug_id: int | str | None,
                                         value: Any) -> None:
        if not self.log_intermediate_outputs:
            return
        copied = self._copy(value)
        if copied is _DROPPED:
            return
        id_int, id_str = _delegate_ids(delegate_debug_id)
        self._events().append(DebugEvent(self.chain_index, self.instruction_id, copied, name,
                                         id_int, id_str))

    def _copy(self, value: Any) -> Any:
        arrays = value if isinstance(value, (list, tuple)) else [value]
        need = sum(_aligned(a.nbytes) for a in arrays if isinstance(a, np.ndarray))
        if self.debug_buffer_used + need > self.debug_buffer_size:
            self.debug_buffer_overflowed = True
            return _DROPPED
        self.debug_buffer_used += need
        if isinstance(value, np.ndarray):
            return value.copy()
        if isinstance(value, (list, tuple)):
            return [a.copy() if isinstance(a, np.ndarray) else a for a in value]
        return value

    # ---- reading --------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every event and free the debug buffer (events accumulate per execute)."""
        self.run_blocks.clear()
        self.debug_buffer_used = 0
        self.debug_buffer_overflowed = False

    def events(self, block: str | None = None) -> list[ProfileEvent | DebugEvent]:
        """All events, or those of the blocks named ``block``, in order."""
        return [e for b in self.run_blocks if block is None or b.name == block for e in b.events]

    def __repr__(self) -> str:
        return (f"RecordingEventTracer({len(self.run_blocks)} run blocks, "
                f"{sum(len(b.events) for b in self.run_blocks)} events)")


_DROPPED = object()


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _delegate_ids(delegate_debug_id: int | str | None) -> tuple[int, str | None]:
    if isinstance(delegate_debug_id, str):
        return UNSET_DELEGATE_ID, delegate_debug_id
    return (UNSET_DELEGATE_ID if delegate_debug_id is None else int(delegate_debug_id)), None


# ---- what backends call (ExecuTorch's free functions; all accept tracer=None) ---------------


@dataclass
class DelegateEventToken:
    """What ``event_tracer_start_profiling_delegate`` returns and its ``end`` takes."""

    name: str | None
    delegate_debug_id: int | str | None
    start_time: int
    debug_handle: int | None = None


def event_tracer_start_profiling_delegate(tracer: EventTracer | None, name: str | None,
                                          delegate_debug_id: int | str | None = None,
                                          debug_handle: int | None = None
                                          ) -> DelegateEventToken | None:
    if tracer is None:
        return None
    return DelegateEventToken(name, delegate_debug_id, now_ns(), debug_handle)


def event_tracer_end_profiling_delegate(tracer: EventTracer | None,
                                        token: DelegateEventToken | None,
                                        metadata: bytes | None = None) -> None:
    if tracer is None or token is None:
        return
    tracer.log_profiling_delegate(token.name, token.delegate_debug_id, token.start_time,
                                  now_ns(), metadata, token.debug_handle)


def event_tracer_log_profiling_delegate(tracer: EventTracer | None, name: str | None,
                                        delegate_debug_id: int | str | None, start_time: int,
                                        end_time: int, metadata: bytes | None = None,
                                        debug_handle: int | None = None) -> None:
    if tracer is not None:
        tracer.log_profiling_delegate(name, delegate_debug_id, start_time, end_time, metadata,
                                      debug_handle)


def event_tracer_log_output_delegate(tracer: EventTracer | None, name: str | None,
                                     delegate_debug_id: int | str | None, value: Any) -> None:
    if tracer is not None:
        tracer.log_intermediate_output_delegate(name, delegate_debug_id, value)
