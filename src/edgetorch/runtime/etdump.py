"""Write what a :class:`RecordingEventTracer` recorded as ExecuTorch's ETDump (``.etdp``) and
debug buffer, so that ExecuTorch's Inspector (and ours) read runs of this runtime.

As ExecuTorch's runtime does: the debug buffer is the whole ``debug_buffer_size`` bytes; each
logged tensor's data sits at a 64-byte boundary and the ETDump ``Tensor.offset`` is its offset
from the buffer's start; program outputs carry ``output=Bool(true)`` and the unset chain id as
an unsigned ``-1``; with no debug buffer there are profile events only.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..schema import etdump as E
from ..schema.scalar_type import from_numpy_dtype
from .event_tracer import DebugEvent, ProfileEvent, RecordingEventTracer

_ALIGN = 64
_U64 = (1 << 64) - 1


class _DebugBuffer:
    """The bytes tensors are copied into, in logging order, each at a 64-byte boundary."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.used = 0

    def put(self, array: np.ndarray) -> int:
        offset = -(-self.used // _ALIGN) * _ALIGN
        raw = np.ascontiguousarray(array).tobytes()
        end = offset + len(raw)
        if end > len(self.data):  # the tracer already dropped what would not fit
            raise InvalidArgumentError(
                f"the debug buffer ({len(self.data)} bytes) cannot hold a logged tensor of "
                f"{len(raw)} bytes; load the program with a larger debug_buffer_size")
        self.data[offset:end] = raw
        self.used = end
        return offset


def _tensor(array: np.ndarray, buffer: _DebugBuffer) -> E.Tensor:
    array = np.asarray(array)
    # Contiguous strides in elements, from the shape (np.ascontiguousarray would turn a 0-dim
    # array into shape (1,), and the Inspector would read strides [1] for sizes []).
    strides, step = [], 1
    for d in reversed(array.shape):
        strides.insert(0, step)
        step *= max(int(d), 1)
    return E.Tensor(from_numpy_dtype(array.dtype), [int(d) for d in array.shape], strides,
                    buffer.put(array))


def _value(value: Any, buffer: _DebugBuffer, output: bool) -> E.Value:
    flag = E.Bool(True) if output else None
    if isinstance(value, np.ndarray):
        return E.Value(E.ValueType.TENSOR, tensor=_tensor(value, buffer), output=flag)
    if isinstance(value, (list, tuple)) and all(isinstance(v, np.ndarray) for v in value):
        tensors = [_tensor(v, buffer) for v in value]
        return E.Value(E.ValueType.TENSOR_LIST, tensor_list=E.TensorList(tensors), output=flag)
    if isinstance(value, (bool, np.bool_)):
        return E.Value(E.ValueType.BOOL, bool_value=E.Bool(bool(value)), output=flag)
    if isinstance(value, (int, np.integer)):
        return E.Value(E.ValueType.INT, int_value=E.Int(int(value)), output=flag)
    if isinstance(value, (float, np.floating)):
        return E.Value(E.ValueType.DOUBLE, double_value=E.Double(float(value)), output=flag)
    return E.Value(E.ValueType.NULL, output=flag)


def _event(event: ProfileEvent | DebugEvent, buffer: _DebugBuffer) -> E.Event:
    if isinstance(event, ProfileEvent):
        return E.Event(profile_event=E.ProfileEvent(
            name=event.name, chain_index=event.chain_index, instruction_id=event.instruction_id,
            delegate_debug_id_int=event.delegate_debug_id_int,
            delegate_debug_id_str=event.delegate_debug_id_str,
            delegate_debug_metadata=event.delegate_debug_metadata,
            start_time=event.start_time, end_time=event.end_time))
    return E.Event(debug_event=E.DebugEvent(
        chain_index=event.chain_index & _U64, instruction_id=event.instruction_id,
        debug_entry=_value(event.value, buffer, event.output),
        delegate_debug_id_int=event.delegate_debug_id_int,
        delegate_debug_id_str=event.delegate_debug_id_str, name=event.name))


def etdump_of(tracer: RecordingEventTracer) -> tuple[E.ETDump, bytes | None]:
    """The ETDump of everything ``tracer`` recorded, and the debug buffer (None without one)."""
    buffer = _DebugBuffer(tracer.debug_buffer_size)
    runs = [E.RunData(name=block.name, bundled_input_index=block.bundled_input_index,
                      allocators=[], events=[_event(e, buffer) for e in block.events])
            for block in tracer.run_blocks]
    return E.ETDump(run_data=runs), (bytes(buffer.data) if tracer.debug_buffer_size else None)


def write_etdump(tracer: RecordingEventTracer, etdump_path: str | os.PathLike,
                 debug_buffer_path: str | os.PathLike | None = None) -> None:
    """Write ``etdump_path`` (and, when given and values were captured, the debug buffer)."""
    etdump, buffer = etdump_of(tracer)
    with open(etdump_path, "wb") as f:
        f.write(E.serialize_to_etdump_flatcc(etdump))
    if debug_buffer_path is not None:
        if buffer is None:
            raise InvalidArgumentError(
                "no debug buffer to write: the program was loaded without one; load it with "
                "load_program(..., enable_etdump=True, debug_buffer_size=N) to capture "
                "intermediate outputs")
        with open(debug_buffer_path, "wb") as f:
            f.write(buffer)
