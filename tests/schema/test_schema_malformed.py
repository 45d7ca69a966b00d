"""Corrupt, truncated and hostile .pte inputs: only FormatError, never a crash or a hang."""

from __future__ import annotations

import random
import struct
import time

import pytest

from edgetorch.errors import FormatError
from edgetorch.schema import program as s
from edgetorch.schema.flatbuffer import program_from_flatbuffer, program_to_flatbuffer
from edgetorch.schema.pte import ExtendedHeader, PteFile, serialize_pte


def _exercise(data: bytes) -> None:
    """Parse ``data`` and use every accessor; anything but FormatError fails the test."""
    try:
        pte = PteFile.parse(data)
        p = pte.program
        pte.size_breakdown()
        count = len(p.constant_segment.offsets) if p.constant_segment else len(p.constant_buffer)
        for i in range(count):
            pte.constant_bytes(i)
        for plan in p.execution_plan:
            for d in plan.delegates:
                pte.delegate_bytes(d)
        for key in pte.named_data_keys():
            pte.named_data(key)
        serialize_pte(**pte.to_serialize_args())
    except FormatError:
        pass
    except Exception as e:  # noqa: BLE001 - the point is to catch anything else
        pytest.fail(f"{type(e).__name__} instead of FormatError: {e}")


def _root_vector_pos(data: bytes, field: int) -> int:
    """File position of the length word of Program field ``field`` (a vector), found by hand."""
    (root,) = struct.unpack_from("<I", data, 0)
    (soffset,) = struct.unpack_from("<i", data, root)
    vtable = root - soffset
    (field_off,) = struct.unpack_from("<H", data, vtable + 4 + 2 * field)
    pos = root + field_off
    return pos + struct.unpack_from("<I", data, pos)[0]


def test_every_truncation_fails_cleanly(et_pte):
    start = time.perf_counter()
    for n in range(len(et_pte)):
        with pytest.raises(FormatError):
            PteFile.parse(et_pte[:n])
    # The bare flatbuffer too, so truncation inside tables and vectors is exercised.
    program_size = PteFile.parse(et_pte).program_size
    for n in range(program_size):
        with pytest.raises(FormatError):
            program_from_flatbuffer(et_pte[:n])
    assert time.perf_counter() - start < 10


def test_random_bit_flips(et_pte):
    rng = random.Random(1234)
    program_size = PteFile.parse(et_pte).program_size
    for i in range(500):
        data = bytearray(et_pte)
        # Most flips land in the flatbuffer (where they matter); some anywhere in the file.
        pos = rng.randrange(program_size if i % 5 else len(data))
        data[pos] ^= 1 << rng.randrange(8)
        _exercise(bytes(data))


def test_random_word_overwrites(et_pte):
    # Overwrite aligned 32-bit words (offsets, lengths, vtable entries) with hostile values.
    rng = random.Random(99)
    program_size = PteFile.parse(et_pte).program_size
    hostile = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFF, 4, 8, program_size]
    for _ in range(300):
        data = bytearray(et_pte)
        pos = rng.randrange(program_size // 4) * 4
        struct.pack_into("<I", data, pos, rng.choice(hostile))
        _exercise(bytes(data))


@pytest.mark.parametrize("size", [0, 1, 7, 8, 39, 64, 1000])
def test_random_garbage(size):
    rng = random.Random(size)
    for _ in range(50):
        _exercise(bytes(rng.randrange(256) for _ in range(size)))


@pytest.mark.parametrize(
    ("magic", "message"),
    [
        (b"XX12", "not a .pte file"),
        (b"ET1!", "not a .pte file"),
        (b"ET11", "unsupported .pte version"),
    ],
)
def test_wrong_magic(et_pte, magic, message):
    data = bytearray(et_pte)
    data[4:8] = magic
    with pytest.raises(FormatError, match=message):
        PteFile.parse(bytes(data))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "message"),
    [
        (12, "<I", 16, "header length is 16"),
        (12, "<I", 0xFFFFFFFF, "header alone"),
        (16, "<Q", 2**63, "says the program is"),
        (16, "<Q", 8, "says the program is"),
        (24, "<Q", 2**63, "segment base offset"),
        (32, "<Q", 2**63, "truncated"),
        (32, "<Q", 2**64 - 1, "truncated"),
    ],
)
def test_hostile_header_fields(et_pte, offset, fmt, value, message):
    data = bytearray(et_pte)
    struct.pack_into(fmt, data, offset, value)
    with pytest.raises(FormatError, match=message):
        PteFile.parse(bytes(data))


def _with_header(flatbuffer: bytes, segment_data: bytes) -> bytes:
    """Insert an eh00 header into ``flatbuffer`` by hand and append ``segment_data``."""
    program_size = 32 + len(flatbuffer)
    base = -(-program_size // 128) * 128
    (root,) = struct.unpack_from("<I", flatbuffer, 0)
    header = ExtendedHeader(program_size, base, len(segment_data)).to_bytes()
    return (
        struct.pack("<I", root + 32)
        + flatbuffer[4:8]
        + header
        + flatbuffer[8:]
        + bytes(base - program_size)
        + segment_data
    )


def _tiny_program(**fields) -> s.Program:
    return s.Program(version=0, execution_plan=[], **fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"segments": [s.DataSegment(0, 2**62)]}, "ends past"),
        ({"segments": [s.DataSegment(2**63, 1)]}, "ends past"),
        (
            {"segments": [s.DataSegment(0, 8)], "constant_segment": s.SubsegmentOffsets(3, [0, 4])},
            "references segment 3",
        ),
        (
            {
                "segments": [s.DataSegment(0, 8)],
                "constant_segment": s.SubsegmentOffsets(0, [0, 2**40]),
            },
            "past the end",
        ),
        (
            {"segments": [s.DataSegment(0, 8)], "named_data": [s.NamedData("w", 1)]},
            "named data 'w' references segment 1",
        ),
        (
            {
                "segments": [s.DataSegment(0, 8)],
                "mutable_data_segments": [s.SubsegmentOffsets(0, [2**33])],
            },
            "past the end",
        ),
    ],
)
def test_inconsistent_segment_references(fields, message):
    data = _with_header(program_to_flatbuffer(_tiny_program(**fields)), bytes(8))
    with pytest.raises(FormatError, match=message):
        PteFile.parse(data)


def test_segments_without_header():
    data = program_to_flatbuffer(_tiny_program(segments=[s.DataSegment(0, 16)]))
    with pytest.raises(FormatError, match="no extended header"):
        PteFile.parse(data)


def test_constants_in_two_places():
    program = _tiny_program(
        constant_buffer=[s.Buffer(b""), s.Buffer(b"abcd")],
        segments=[s.DataSegment(0, 8)],
        constant_segment=s.SubsegmentOffsets(0, [0, 0]),
    )
    with pytest.raises(FormatError, match="only one may be used"):
        PteFile.parse(_with_header(program_to_flatbuffer(program), bytes(8)))


def test_delegate_references_are_checked():
    plan = s.ExecutionPlan(
        "forward",
        s.ContainerMetadata(),
        [],
        [],
        [],
        [],
        [],
        [s.BackendDelegate("B", s.BackendDelegateDataReference(s.DataLocation.INLINE, 2), [])],
        [0],
    )
    with pytest.raises(FormatError, match="inline blob 2"):
        PteFile.parse(program_to_flatbuffer(s.Program(0, [plan])))
    plan.delegates[0].processed = s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 0)
    with pytest.raises(FormatError, match="references segment 0"):
        PteFile.parse(program_to_flatbuffer(s.Program(0, [plan])))


@pytest.mark.parametrize("length", [2**31, 2**32 - 1, 0x40000000])
def test_huge_vector_length(et_pte, length):
    data = bytearray(et_pte)
    struct.pack_into("<I", data, _root_vector_pos(et_pte, 1), length)  # execution_plan
    start = time.perf_counter()
    with pytest.raises(FormatError, match=r"Program.execution_plan.*claims \d+ elements"):
        PteFile.parse(bytes(data))
    assert time.perf_counter() - start < 0.5


def test_huge_scalar_vector_length(et_pte):
    # The constant segment's offsets vector ([uint64]) claims 2^31 entries.
    data = bytearray(et_pte)
    pte = PteFile.parse(et_pte)
    (root,) = struct.unpack_from("<I", et_pte, 0)
    (soffset,) = struct.unpack_from("<i", et_pte, root)
    (field_off,) = struct.unpack_from("<H", et_pte, root - soffset + 4 + 2 * 5)
    table = root + field_off + struct.unpack_from("<I", et_pte, root + field_off)[0]
    offsets_len_pos = _vector_of(et_pte, table, 1)
    assert struct.unpack_from("<I", et_pte, offsets_len_pos)[0] == len(
        pte.program.constant_segment.offsets
    )
    struct.pack_into("<I", data, offsets_len_pos, 2**31)
    with pytest.raises(FormatError, match=r"constant_segment\.offsets.*claims 2147483648 elements"):
        PteFile.parse(bytes(data))


def _vector_of(data: bytes, table: int, field: int) -> int:
    (soffset,) = struct.unpack_from("<i", data, table)
    (field_off,) = struct.unpack_from("<H", data, table - soffset + 4 + 2 * field)
    pos = table + field_off
    return pos + struct.unpack_from("<I", data, pos)[0]


def test_error_messages_name_the_location(et_pte):
    data = bytearray(et_pte)
    struct.pack_into("<I", data, _root_vector_pos(et_pte, 1), 2**31)
    with pytest.raises(FormatError) as info:
        PteFile.parse(bytes(data))
    text = str(info.value)
    assert "execution_plan" in text and "0x" in text and "re-export" in text


def _outcome(read, data):
    try:
        return ("ok", read(data))
    except FormatError as e:
        return (type(e).__name__, str(e))


def test_inline_reads_equal_the_field_readers(et_pte):
    """The generated readers' inline fast paths (vtables, unions, tables, scalar vectors)
    give what the field readers alone give -- the same program, or the same error and
    message -- on the valid flatbuffer and on hundreds of corrupted ones."""
    import copy

    from edgetorch.schema import program as s
    from edgetorch.schema.flatbuffer import PROGRAM

    plain = copy.copy(PROGRAM)
    plain._readers, plain.inline = {}, False
    program_size = PteFile.parse(et_pte).program_size
    flat = bytes(et_pte[:program_size])

    def reader(schema):
        return lambda data: schema.read(data, s.Program, identifiers=(s.FILE_IDENTIFIER,),
                                        what="program flatbuffer", hint="")

    fast, slow = reader(PROGRAM), reader(plain)
    assert _outcome(fast, flat) == _outcome(slow, flat)
    assert _outcome(fast, flat)[0] == "ok"
    rng = random.Random(5)
    hostile = [0, 1, 3, 4, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFF, program_size, program_size - 4]
    kinds = set()
    for i in range(600):
        data = bytearray(flat)
        if i % 2:
            data[rng.randrange(program_size)] ^= 1 << rng.randrange(8)
        else:
            struct.pack_into("<I", data, rng.randrange(program_size // 4) * 4,
                             rng.choice(hostile))
        got, want = _outcome(fast, bytes(data)), _outcome(slow, bytes(data))
        assert got == want, i
        kinds.add(got[0])
    assert len(kinds) >= 2  # both valid reads and errors were compared
