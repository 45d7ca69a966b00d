"""program.fbs flatbuffer writer and bounds-checked reader."""

from __future__ import annotations

import math
import struct
import time

import flatbuffers
import pytest
from schema_helpers import make_rich_program

from edgetorch.errors import FormatError
from edgetorch.schema import program as s
from edgetorch.schema.flatbuffer import program_from_flatbuffer, program_to_flatbuffer
from edgetorch.schema.scalar_type import ScalarType


def _program_with_inline_data() -> s.Program:
    program, kw = make_rich_program()
    program.constant_buffer = [s.Buffer(b) for b in kw["constant_buffers"]]
    program.backend_delegate_data = [s.BackendDelegateInlineData(b) for b in kw["delegate_blobs"]]
    program.segments = [s.DataSegment(0, 10), s.DataSegment(128, 3)]
    program.mutable_data_segments = [s.SubsegmentOffsets(1, [0, 0, 12])]
    program.named_data = [s.NamedData("k", 0), s.NamedData("ключ", 1)]
    return program


def test_round_trip_every_table_and_union_member():
    program = _program_with_inline_data()
    data = program_to_flatbuffer(program)
    assert data[4:8] == b"ET12"
    assert program_from_flatbuffer(data) == program


def test_optional_fields_stay_absent():
    program, _ = make_rich_program()
    plan = program.execution_plan[0]
    plan.non_const_buffer_device = None
    plan.chains[0].stacktrace = None
    program.constant_segment = None
    back = program_from_flatbuffer(program_to_flatbuffer(program))
    assert back.execution_plan[0].non_const_buffer_device is None
    assert back.execution_plan[0].chains[0].stacktrace is None
    assert back.constant_segment is None
    assert back.mutable_data_segments is None and back.named_data is None


def test_inline_data_is_aligned_and_zero_copy():
    program = _program_with_inline_data()
    data = program_to_flatbuffer(program, constant_tensor_alignment=64, delegate_alignment=32)
    back = program_from_flatbuffer(data)
    for buf in back.constant_buffer:
        assert isinstance(buf.storage, memoryview)
        if len(buf.storage):
            # The vector's data must sit at a multiple of the force_align value.
            assert _data_offset(data, buf.storage) % 64 == 0
    for blob in back.backend_delegate_data:
        if len(blob.data):
            assert _data_offset(data, blob.data) % 32 == 0


def _data_offset(data: bytes, view: memoryview) -> int:
    return data.find(bytes(view))


def test_nan_double_survives():
    program, _ = make_rich_program()
    program.execution_plan[0].values[4] = s.EValue(s.Double(math.nan))
    back = program_from_flatbuffer(program_to_flatbuffer(program))
    assert math.isnan(back.execution_plan[0].values[4].val.double_val)


def test_writer_rejects_bad_values():
    program, _ = make_rich_program()
    program.execution_plan[0].values[0] = s.EValue(42)
    with pytest.raises(FormatError, match="not a member of the union"):
        program_to_flatbuffer(program)
    program, _ = make_rich_program()
    program.execution_plan[0].inputs = [2**40]
    with pytest.raises(FormatError, match="ExecutionPlan.inputs"):
        program_to_flatbuffer(program)
    with pytest.raises(FormatError, match="power of two"):
        program_to_flatbuffer(program, constant_tensor_alignment=24)


def test_wrong_identifier():
    data = bytearray(program_to_flatbuffer(make_rich_program()[0]))
    data[4:8] = b"ET11"
    with pytest.raises(FormatError, match="identifier"):
        program_from_flatbuffer(bytes(data))


def _evalue_program(build_val) -> bytes:
    """A minimal Program flatbuffer whose single EValue is built by ``build_val(builder)``."""
    b = flatbuffers.Builder(0)
    tag, val = build_val(b)
    b.StartObject(2)
    b.PrependUint8Slot(0, tag, 0)
    if val:
        b.PrependUOffsetTRelativeSlot(1, val, 0)
    ev = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(ev)
    values = b.EndVector()
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(2, values, 0)
    plan = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(plan)
    plans = b.EndVector()
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, plans, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    return bytes(b.Output())


def _int_table(b, value=7):
    b.StartObject(1)
    b.PrependInt64Slot(0, value, 0)
    return b.EndObject()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda b: (0, 0), "type NONE"),
        (lambda b: (12, _int_table(b)), "type tag 12"),
        (lambda b: (2, 0), "value is missing"),
    ],
)
def test_bad_unions(build, message):
    with pytest.raises(FormatError, match=message):
        program_from_flatbuffer(_evalue_program(build))


def test_bad_enum_value():
    def tensor(b):
        b.StartObject(10)
        b.PrependInt8Slot(0, 99, 0)
        return 5, b.EndObject()

    with pytest.raises(FormatError, match="99 is not a valid ScalarType"):
        program_from_flatbuffer(_evalue_program(tensor))


def test_absent_fields_take_defaults():
    def tensor(b):
        b.StartObject(10)
        return 5, b.EndObject()

    value = program_from_flatbuffer(_evalue_program(tensor)).execution_plan[0].values[0].val
    assert value == s.Tensor(ScalarType.BYTE, 0, [], [])


def test_amplification_is_bounded():
    # 20k EValues all pointing at one IntList of 20k items: a 240 KB buffer that would make a
    # naive reader decode 400M integers. The work budget must stop it quickly.
    n = 20_000
    b = flatbuffers.Builder(0)
    b.StartVector(8, n, 8)
    raw = struct.pack(f"<{n}q", *range(n))
    b.head -= len(raw)
    b.Bytes[b.head : b.head + len(raw)] = raw
    items = b.EndVector()
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, items, 0)
    int_list = b.EndObject()
    b.StartObject(2)
    b.PrependUint8Slot(0, 7, 0)
    b.PrependUOffsetTRelativeSlot(1, int_list, 0)
    ev = b.EndObject()
    b.StartVector(4, n, 4)
    for _ in range(n):
        b.PrependUOffsetTRelative(ev)
    values = b.EndVector()
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(2, values, 0)
    plan = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(plan)
    plans = b.EndVector()
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, plans, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    start = time.perf_counter()
    with pytest.raises(FormatError, match="more than"):
        program_from_flatbuffer(bytes(b.Output()))
    assert time.perf_counter() - start < 2.0


def _rich_program_of(n_values: int):
    program, _ = make_rich_program()
    plan = program.execution_plan[0]
    template = list(plan.values)
    plan.values = [template[i % len(template)] for i in range(n_values)]
    plan.chains[0].instructions = plan.chains[0].instructions * (n_values // 20)
    plan.chains[0].stacktrace = None
    return plan, program_to_flatbuffer(program)


def test_reader_time_grows_linearly_to_10k_values():
    """A complexity guard, not a timing one (the machine's speed cancels out): reading ten
    times the values takes about ten times as long, far from the hundred of a quadratic
    reader (the fastest of three reads each)."""
    times = {}
    for n in (1_000, 10_000):
        plan, data = _rich_program_of(n)
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            back = program_from_flatbuffer(data)
            best = min(best, time.perf_counter() - start)
        assert len(back.execution_plan[0].values) == n
        assert back.execution_plan[0] == plan
        times[n] = best
    assert times[10_000] < 35 * times[1_000], times
