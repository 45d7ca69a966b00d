"""Runs as the Inspector sees them: ETDump run data (from a file, bytes, or a live
``RecordingEventTracer``) turned into plain records, with tensor values read from the debug
buffer."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import FormatError
from ...runtime import event_tracer as et
from ...schema import etdump as E
from ...schema.scalar_type import ScalarType
from ._inspector_utils import is_debug_output


@dataclass
class RawProfile:
    name: str | None
    chain_index: int
    instruction_id: int
    delegate_debug_id_int: int
    delegate_debug_id_str: str | None
    delegate_debug_metadata: bytes | str | None
    start_time: int
    end_time: int


@dataclass
class RawDebug:
    chain_index: int
    instruction_id: int
    value: Any  # ndarray | list[ndarray] | scalar | Missing (no debug buffer)
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    output: bool = False
    name: str | None = None


@dataclass
class RawRun:
    name: str
    bundled_input_index: int = -1
    events: list[RawProfile | RawDebug] = field(default_factory=list)


@dataclass(frozen=True)
class Missing:
    """A logged tensor whose data is in a debug buffer nobody gave us: what the ETDump says of
    it (sizes, scalar type), so runs that logged different shapes still differ."""

    sizes: tuple[int, ...] = ()
    scalar_type: int = -1

    def __repr__(self) -> str:
        return f"<no debug buffer: {list(self.sizes)}>"




def runs_from_tracer(tracer: et.RecordingEventTracer) -> list[RawRun]:
    runs = []
    for block in tracer.run_blocks:
        run = RawRun(block.name, block.bundled_input_index)
        for e in block.events:
            if isinstance(e, et.ProfileEvent):
                run.events.append(RawProfile(e.name, e.chain_index, e.instruction_id,
                                             e.delegate_debug_id_int, e.delegate_debug_id_str,
                                             e.delegate_debug_metadata, e.start_time, e.end_time))
            else:
                run.events.append(RawDebug(e.chain_index, e.instruction_id, e.value,
                                           e.delegate_debug_id_int, e.delegate_debug_id_str,
                                           e.output, e.name))
        runs.append(run)
    return runs


def runs_from_etdump(etdump: E.ETDump, buffer: Any) -> list[RawRun]:
    runs = []
    budget = _TensorBudget(buffer)
    for rd in etdump.run_data:
        run = RawRun(rd.name or "", rd.bundled_input_index)
        for ev in rd.events or []:
            populated = ev.profile_event or ev.debug_event
            if populated is not None:  # (allocation events are not the Inspector's)
                run.events.append(raw_event(populated, buffer, budget))
        runs.append(run)
    return runs


def raw_event(e: E.ProfileEvent | E.DebugEvent, buffer: Any = None,
              budget: _TensorBudget | None = None) -> RawProfile | RawDebug:
    """An ETDump profile or debug event as a record, its logged value read from ``buffer``
    (``Missing`` for a tensor when there is none)."""
    if isinstance(e, E.ProfileEvent):
        return RawProfile(e.name, e.chain_index, e.instruction_id, e.delegate_debug_id_int,
                          e.delegate_debug_id_str, e.delegate_debug_metadata, e.start_time,
                          e.end_time)
    chain = e.chain_index - (1 << 64) if e.chain_index >= 1 << 63 else e.chain_index
    entry = e.debug_entry
    output = is_debug_output(entry)
    return RawDebug(chain, e.instruction_id, _value(entry, buffer, budget or _TensorBudget(buffer)),
                    e.delegate_debug_id_int, e.delegate_debug_id_str, output, e.name)


class _TensorBudget:
    """The debug buffer, and how much of it the logged tensors may copy out in all: a
    well-formed ETDump's tensors are distinct regions, so twice the buffer is plenty; a hostile
    one could point ten thousand events at the same gigabyte."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer
        self.left = 2 * len(buffer) + (1 << 20) if buffer is not None else 0

    def take(self, nbytes: int) -> None:
        self.left -= nbytes
        if self.left < 0:
            raise FormatError(f"the ETDump's tensors copy more than twice the {len(self.buffer)}-"
                              "byte debug buffer out of it; the ETDump is corrupted or does not "
                              "belong to this debug buffer")


def _value(v: E.Value | None, buffer: Any, budget: _TensorBudget) -> Any:
    if v is None or v.val == E.ValueType.NULL:
        return None
    if v.val == E.ValueType.TENSOR:
        return _tensor(v.tensor, buffer, budget)
    if v.val == E.ValueType.TENSOR_LIST:
        return [_tensor(t, buffer, budget) for t in v.tensor_list.tensors]
    if v.val == E.ValueType.INT:
        return v.int_value.int_val
    if v.val == E.ValueType.BOOL:
        return v.bool_value.bool_val
    if v.val == E.ValueType.FLOAT:
        return v.float_value.float_val
    if v.val == E.ValueType.DOUBLE:
        return v.double_value.double_val
    return None


_NUMPY = {ScalarType.FLOAT: np.float32, ScalarType.DOUBLE: np.float64, ScalarType.HALF: np.float16,
          ScalarType.INT: np.int32, ScalarType.LONG: np.int64, ScalarType.SHORT: np.int16,
          ScalarType.CHAR: np.int8, ScalarType.BYTE: np.uint8, ScalarType.BOOL: np.bool_}


_MAX_DIMS = 64


def _tensor(t: E.Tensor, buffer: Any, budget: _TensorBudget | None = None) -> Any:
    if buffer is None:
        return Missing(tuple(int(s) for s in t.sizes), int(t.scalar_type))
    dtype = _NUMPY.get(ScalarType(t.scalar_type))
    if dtype is None:
        raise FormatError(f"ETDump tensor has scalar type {t.scalar_type!r}, which the Inspector "
                          "cannot read; report it")
    sizes = [int(s) for s in t.sizes]
    if any(s < 0 for s in sizes):
        raise FormatError(f"ETDump tensor has negative sizes {sizes}; the ETDump is corrupted, "
                          "record it again")
    # ExecuTorch's sizes are int32 (SizesType) and NumPy holds at most 64 dimensions.
    if len(sizes) > _MAX_DIMS or any(s >= 1 << 31 for s in sizes):
        raise FormatError(f"ETDump tensor has sizes {sizes[:8]}{'...' if len(sizes) > 8 else ''} "
                          f"({len(sizes)} dimensions), which no runtime logs; the ETDump is "
                          "corrupted")
    numel = math.prod(sizes)
    if numel == 0:  # ExecuTorch logs empty outputs (batch norm's mean/var) at offset -1
        return np.zeros(tuple(sizes), dtype)
    item = np.dtype(dtype).itemsize
    nbytes = numel * item
    if t.offset < 0 or t.offset + nbytes > len(buffer):
        raise FormatError(f"ETDump tensor {sizes} at offset {t.offset} lies outside the "
                          f"debug buffer ({len(buffer)} bytes); pass the debug buffer written by "
                          "the same run")
    # A strides list that does not match the rank (edgetorch's writer once logged 0-dim values
    # with strides [1]) is read as contiguous rather than failing.
    # A dimension of size 1 never steps, so its stride is irrelevant (and may be anything: a
    # huge one overflowed NumPy, with a view of the mapped buffer still alive).
    strides = [int(s) if n > 1 else 0 for n, s in zip(sizes, t.strides)]
    strided = bool(strides and numel and len(t.strides) == len(sizes))
    if strided:
        # ExecuTorch logs a tensor's nbytes: every element the strides reach must lie in them
        # (as_strided itself would read whatever memory they point at).
        low = sum(min(0, (n - 1) * s) for n, s in zip(sizes, strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(sizes, strides))
        if low < 0 or high >= numel:
            raise FormatError(f"ETDump tensor {sizes} has strides {strides} that reach outside "
                              f"its {numel} elements; the ETDump is corrupted")
    (budget or _TensorBudget(buffer)).take(nbytes)
    # (checked first: a view of a memory-mapped buffer must not outlive this call)
    flat = np.frombuffer(buffer, dtype=dtype, count=numel, offset=t.offset)
    if strided:
        return np.lib.stride_tricks.as_strided(
            flat, tuple(sizes), tuple(s * item for s in strides)).copy()
    return flat.reshape(tuple(sizes)).copy()
