"""ETDump (``ED00``) and BundledProgram (``BP08``) formats: round trips and hostile inputs."""

from __future__ import annotations

import random
import struct
import time

import pytest
from devtools_helpers import rich_bundled_program, rich_etdump

from edgetorch.errors import FormatError
from edgetorch.schema import bundled_program as B
from edgetorch.schema import etdump as E
from edgetorch.schema.scalar_type import ScalarType


def test_etdump_round_trip_and_layout():
    etdump = rich_etdump()
    data = E.serialize_to_etdump_flatcc(etdump)
    assert struct.unpack_from("<I", data, 0)[0] == len(data) - 4
    assert data[8:12] == b"ED00"
    assert E.deserialize_from_etdump_flatcc(data) == etdump
    plain = E.serialize_to_etdump_flatcc(etdump, size_prefixed=False)
    assert plain[4:8] == b"ED00"
    assert E.deserialize_from_etdump_flatcc(plain, size_prefixed=False) == etdump


def test_etdump_absent_fields_take_schema_defaults():
    data = E.serialize_to_etdump_flatcc(E.ETDump(0, [E.RunData("r", events=[
        E.Event(profile_event=E.ProfileEvent()), E.Event(debug_event=E.DebugEvent())])]))
    run = E.deserialize_from_etdump_flatcc(data).run_data[0]
    assert run.bundled_input_index == -1 and run.allocators is None
    profile, debug = run.events[0].profile_event, run.events[1].debug_event
    assert (profile.name, profile.instruction_id, profile.delegate_debug_id_int) == (None, -1, -1)
    assert profile.delegate_debug_metadata is None
    assert (debug.instruction_id, debug.debug_entry, debug.name) == (-1, None, None)


def test_bundled_program_round_trip_and_alignment(et_pte):
    bp = rich_bundled_program(et_pte)
    data = B.serialize_from_bundled_program_to_flatbuffer(bp)
    assert data[4:8] == b"BP08"
    back = B.deserialize_from_flatbuffer_to_bundled_program(data)
    assert back == bp
    assert isinstance(back.program, memoryview) and bytes(back.program) == et_pte
    assert data.find(et_pte) % B.PROGRAM_ALIGNMENT == 0
    tensor = back.method_test_suites[0].test_cases[0].inputs[0].val
    assert data.find(bytes(tensor.data)) % B.TENSOR_DATA_ALIGNMENT == 0
    # Re-serializing what was read gives the same bytes.
    assert B.serialize_from_bundled_program_to_flatbuffer(back) == data


def test_writers_reject_bad_values(et_pte):
    bp = rich_bundled_program(et_pte)
    bp.method_test_suites[0].test_cases[0].inputs[0] = B.Value(E.Int(3))
    with pytest.raises(FormatError, match="not a member of the union"):
        B.serialize_from_bundled_program_to_flatbuffer(bp)
    bp = rich_bundled_program(et_pte)
    bp.method_test_suites[0].test_cases[0].inputs[0].val.sizes = [2**40]
    with pytest.raises(FormatError, match="Tensor.sizes"):
        B.serialize_from_bundled_program_to_flatbuffer(bp)
    etdump = rich_etdump()
    etdump.run_data[0].bundled_input_index = 2**40
    with pytest.raises(FormatError, match="cannot serialize"):
        E.serialize_to_etdump_flatcc(etdump)


# --- hostile inputs -------------------------------------------------------------------------


def _etdump_bytes() -> bytes:
    return E.serialize_to_etdump_flatcc(rich_etdump())


def _bpte_bytes(pte: bytes) -> bytes:
    return B.serialize_from_bundled_program_to_flatbuffer(rich_bundled_program(pte))


def _only_format_errors(parse, data: bytes) -> None:
    try:
        parse(data)
    except FormatError:
        pass
    except Exception as e:  # noqa: BLE001 - anything but FormatError is the bug
        pytest.fail(f"{type(e).__name__} instead of FormatError: {e}")


def test_every_truncation_fails_cleanly(et_pte):
    etdump = _etdump_bytes()
    for n in range(len(etdump)):
        with pytest.raises(FormatError):
            E.deserialize_from_etdump_flatcc(etdump[:n])
    bp = rich_bundled_program(et_pte[:200])
    bpte = B.serialize_from_bundled_program_to_flatbuffer(bp)
    for n in range(len(bpte)):
        # Dropping only trailing alignment padding leaves a complete buffer.
        try:
            assert B.deserialize_from_flatbuffer_to_bundled_program(bpte[:n]) == bp, n
        except FormatError:
            pass
    with pytest.raises(FormatError):
        B.deserialize_from_flatbuffer_to_bundled_program(bpte[: len(bpte) - 16])


@pytest.mark.parametrize("which", ["etdump", "bpte"])
def test_random_corruption_only_format_errors(et_pte, which):
    if which == "etdump":
        clean, parse = _etdump_bytes(), E.deserialize_from_etdump_flatcc
    else:
        clean, parse = _bpte_bytes(et_pte[:64]), B.deserialize_from_flatbuffer_to_bundled_program
    rng = random.Random(7)
    hostile = [0, 1, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(clean)]
    for i in range(600):
        data = bytearray(clean)
        if i % 2:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        else:
            struct.pack_into("<I", data, rng.randrange(len(data) // 4) * 4, rng.choice(hostile))
        _only_format_errors(parse, bytes(data))


def test_size_prefix_larger_than_the_file():
    data = bytearray(_etdump_bytes())
    struct.pack_into("<I", data, 0, len(data))
    with pytest.raises(FormatError, match="size prefix says"):
        E.deserialize_from_etdump_flatcc(bytes(data))


def test_wrong_identifiers(et_pte):
    with pytest.raises(FormatError, match="identifier b'BP08'"):
        bpte = _bpte_bytes(et_pte[:16])
        E.deserialize_from_etdump_flatcc(struct.pack("<I", len(bpte)) + bpte)
    with pytest.raises(FormatError, match="identifier"):
        B.deserialize_from_flatbuffer_to_bundled_program(et_pte)


def test_huge_vector_length_is_refused_without_allocating():
    # One RunData whose events vector claims 2^31 entries.
    etdump = E.ETDump(0, [E.RunData("r", events=[E.Event(allocation_event=E.AllocationEvent())])])
    data = bytearray(E.serialize_to_etdump_flatcc(etdump))
    marker = struct.pack("<I", 1)
    # The events vector's length word is the last 1 before the event's table offset.
    pos = max(i for i in range(4, len(data) - 4, 4) if data[i : i + 4] == marker)
    struct.pack_into("<I", data, pos, 2**31)
    start = time.perf_counter()
    with pytest.raises(FormatError, match=r"claims 2147483648 elements"):
        E.deserialize_from_etdump_flatcc(bytes(data))
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (E.Event(), "0 of profile_event"),
        (E.Event(E.ProfileEvent("p"), E.AllocationEvent()), "2 of profile_event"),
        (E.Event(debug_event=E.DebugEvent(debug_entry=E.Value(E.ValueType.TENSOR))),
         "val TENSOR but no tensor"),
    ],
)
def test_inconsistent_events(event, message):
    data = E.serialize_to_etdump_flatcc(E.ETDump(0, [E.RunData("r", events=[event])]))
    with pytest.raises(FormatError, match=message):
        E.deserialize_from_etdump_flatcc(data)


def test_bad_scalar_type_in_bundled_tensor():
    bp = B.BundledProgram(2, [B.BundledMethodTestSuite("forward", [B.BundledMethodTestCase(
        [B.Value(B.Tensor(ScalarType.FLOAT, [1], b"\0" * 4, [0]))], [])])], b"")
    data = bytearray(B.serialize_from_bundled_program_to_flatbuffer(bp))
    # scalar_type is the only int8 field: FLOAT (6) -> 99.
    pos = bytes(data).rfind(b"\x06")
    data[pos] = 99
    with pytest.raises(FormatError, match="99 is not a valid ScalarType"):
        B.deserialize_from_flatbuffer_to_bundled_program(bytes(data))
