"""The .pte container: writer layout, reader accessors, and ExecuTorch's own file."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from schema_helpers import make_rich_program

from edgetorch.errors import FormatError
from edgetorch.schema import program as s
from edgetorch.schema.pte import ExtendedHeader, PteFile, serialize_pte

# --- ExecuTorch's file ------------------------------------------------------------------


def test_reads_executorch_file(et_pte):
    pte = PteFile.parse(et_pte)
    plan = pte.program.execution_plan[0]
    assert plan.name == "forward"
    assert [op.qualified_name for op in plan.operators] == [
        "aten::permute_copy.out",
        "aten::addmm.out",
        "aten::relu.out",
    ]
    assert plan.non_const_buffer_sizes == [0, 8576]
    assert len(plan.chains[0].instructions) == 8
    assert all(isinstance(i.instr_args, s.KernelCall) for i in plan.chains[0].instructions)
    weight = plan.values[0].val
    assert weight.sizes == [64, 20] and weight.data_buffer_idx == 1
    assert len(pte.constant_bytes(1)) == 64 * 20 * 4
    assert len(pte.constant_bytes(0)) == 0
    assert len(pte.constant_bytes(6, nbytes=16)) == 16
    assert pte.header == ExtendedHeader(2800, 2816, 14224)
    assert pte.segment_base == 2816
    assert pte.program.constant_buffer == []
    assert pte.program.named_data is None


def test_constant_bytes_are_zero_copy(et_pte):
    pte = PteFile.parse(et_pte)
    view = pte.constant_bytes(1)
    assert view.obj is et_pte
    start = pte.segment_base + pte.program.constant_segment.offsets[1]
    assert bytes(view) == et_pte[start : start + 5120]


def test_reserialize_executorch_file_is_byte_identical(et_pte):
    assert serialize_pte(**PteFile.parse(et_pte).to_serialize_args()) == et_pte


def test_size_breakdown(et_pte):
    sizes = PteFile.parse(et_pte).size_breakdown()
    assert sizes["total"] == len(et_pte)
    assert sum(v for k, v in sizes.items() if k != "total") == len(et_pte)
    assert sizes["header"] == 40
    assert sizes["program"] == 2760
    assert sizes["constant_segment"] == 14224
    assert sizes["padding"] == 16


# --- our files ----------------------------------------------------------------------


@pytest.fixture
def rich_pte(rich):
    program, kwargs = rich
    return program, kwargs, serialize_pte(program, **kwargs)


def test_round_trip(rich_pte):
    program, kwargs, data = rich_pte
    pte = PteFile.parse(data)
    p = pte.program

    # Everything but the delegate references comes back as written.
    def plain(plan):
        return dataclasses.replace(
            plan, delegates=[dataclasses.replace(d, processed=None) for d in plan.delegates]
        )

    assert [plain(x) for x in p.execution_plan] == [plain(x) for x in program.execution_plan]
    assert p.version == program.version

    for i, data_i in enumerate(kwargs["constant_buffers"]):
        assert pte.constant_bytes(i, nbytes=len(data_i)) == data_i
    for i, data_i in enumerate(kwargs["mutable_buffers"]):
        assert pte.mutable_bytes(i, nbytes=len(data_i)) == data_i
    for plan, orig in zip(p.execution_plan, program.execution_plan):
        for d, od in zip(plan.delegates, orig.delegates):
            assert pte.delegate_bytes(d) == kwargs["delegate_blobs"][od.processed.index]
    assert pte.named_data_keys() == list(kwargs["named_data"])
    for key, (blob, _) in kwargs["named_data"].items():
        assert pte.named_data(key) == blob
    assert program.segments == [], "serialize_pte must not modify its input"


def test_segment_layout_matches_executorch_rules(rich_pte):
    _, kwargs, data = rich_pte
    pte = PteFile.parse(data)
    p = pte.program
    # Segment order: constants, mutable data, delegates (deduplicated), named data (deduplicated).
    constant = b"".join([b"", bytes(range(40)), bytes(8), b"\x07" * 32, b"abc"])
    assert p.constant_segment == s.SubsegmentOffsets(0, [0, 0, 48, 80])
    assert p.mutable_data_segments == [s.SubsegmentOffsets(1, [0, 0, 12])]
    assert [seg.size for seg in p.segments] == [len(constant), 17, 300, 50, 100, 10]
    assert all(seg.offset % 128 == 0 for seg in p.segments)
    assert bytes(pte.segment_bytes(0)) == constant
    # Empty delegate blobs stay inline, re-indexed in visiting order.
    refs = [d.processed for plan in p.execution_plan for d in plan.delegates]
    assert refs == [
        s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 2),
        s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 3),
        s.BackendDelegateDataReference(s.DataLocation.INLINE, 0),
        s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 2),
        s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 3),
        s.BackendDelegateDataReference(s.DataLocation.INLINE, 1),
    ]
    assert [nd.segment_index for nd in p.named_data] == [4, 4, 5]
    # Header: right after the 8-byte prefix, program padded to 16, segments at a multiple of 128.
    magic, length, program_size, base, data_size = struct.unpack_from("<4sIQQQ", data, 8)
    assert (magic, length) == (b"eh00", 32)
    assert base % 128 == 0 and base - program_size < 128
    assert data_size == p.segments[-1].offset + p.segments[-1].size == len(data) - base


def test_reserialize_round_trip(rich_pte):
    _, _, data = rich_pte
    assert serialize_pte(**PteFile.parse(data).to_serialize_args()) == data


def test_named_data_alignment_above_segment_alignment(rich):
    program, kwargs = rich
    kwargs["named_data"] = {"a": (b"x" * 3, 512), "b": (b"y", 1)}
    pte = PteFile.parse(serialize_pte(program, **kwargs))
    by_key = {nd.key: pte.program.segments[nd.segment_index] for nd in pte.program.named_data}
    assert by_key["a"].offset % 512 == 0
    assert (pte.segment_base + by_key["a"].offset) % 512 == 0 or pte.segment_base % 512
    assert by_key["b"].offset == by_key["a"].offset + 128


def test_delegates_stay_inline_without_extraction(rich):
    program, kwargs = rich
    pte = PteFile.parse(serialize_pte(program, extract_delegate_segments=False, **kwargs))
    p = pte.program
    assert len(p.backend_delegate_data) == len(kwargs["delegate_blobs"])
    for plan in p.execution_plan:
        for d in plan.delegates:
            assert d.processed.location == s.DataLocation.INLINE
            assert pte.delegate_bytes(d) == kwargs["delegate_blobs"][d.processed.index]
    assert pte.to_serialize_args()["extract_delegate_segments"] is False


def test_no_segments_means_no_header(rich):
    program, _ = rich
    for plan in program.execution_plan:
        plan.delegates = []
    data = serialize_pte(program, constant_buffers=[], delegate_blobs=None, named_data=None)
    assert data[8:12] != b"eh00"
    pte = PteFile.parse(data)
    assert pte.header is None and pte.program.segments == []
    assert pte.size_breakdown()["program"] == len(data) - 8


def test_placeholder_only_constant_segment(rich):
    # ExecuTorch records an empty constant segment (offsets [0]) but, with no segment data,
    # writes no extended header.
    program, _ = rich
    for plan in program.execution_plan:
        plan.delegates = []
    data = serialize_pte(program, constant_buffers=[b""], delegate_blobs=None, named_data=None)
    pte = PteFile.parse(data)
    assert pte.header is None
    assert pte.program.constant_segment == s.SubsegmentOffsets(0, [0])
    assert pte.program.segments == [s.DataSegment(0, 0)]
    assert len(pte.constant_bytes(0)) == 0


def test_legacy_constant_buffer_layout(rich):
    program, kwargs = rich
    for plan in program.execution_plan:
        plan.delegates = []
    program.constant_buffer = [s.Buffer(b) for b in kwargs["constant_buffers"]]
    program.constant_segment = None
    # Written directly (no segments), as pre-2024 files did.
    from edgetorch.schema.flatbuffer import program_to_flatbuffer

    pte = PteFile.parse(program_to_flatbuffer(program))
    assert bytes(pte.constant_bytes(1)) == bytes(range(40))
    assert pte.constant_bytes(3, nbytes=2) == b"ab"
    with pytest.raises(FormatError, match="holds 3 bytes"):
        pte.constant_bytes(3, nbytes=4)


def test_numpy_arrays_are_accepted_as_blobs(rich):
    np = pytest.importorskip("numpy")
    program, kwargs = rich
    array = np.arange(10, dtype=np.float32)
    kwargs["constant_buffers"] = [b"", array]
    pte = PteFile.parse(serialize_pte(program, **kwargs))
    assert pte.constant_bytes(1) == array.tobytes()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p, kw: kw.update(constant_buffers=[b"x"]), "empty placeholder"),
        (lambda p, kw: kw.update(delegate_blobs=[b"a"]), "references blob"),
        (lambda p, kw: kw["delegate_blobs"].append(b"unused"), "not referenced"),
        (lambda p, kw: kw.update(segment_alignment=100), "power of two"),
        (lambda p, kw: kw.update(named_data={"k": (b"x", 0)}), "alignment"),
        (lambda p, kw: setattr(p, "segments", [s.DataSegment(0, 1)]), "already lists"),
        (lambda p, kw: setattr(p, "constant_buffer", [s.Buffer(b"")]), "both"),
        (lambda p, kw: setattr(p, "constant_segment", s.SubsegmentOffsets(0, [0])), "already has"),
        (lambda p, kw: kw.update(constant_buffers=[b"", "text"]), "bytes-like"),
    ],
)
def test_serialize_rejects_inconsistent_inputs(change, message):
    program, kwargs = make_rich_program()
    change(program, kwargs)
    with pytest.raises(FormatError, match=message):
        serialize_pte(program, **kwargs)


def test_accessor_errors(rich_pte):
    _, _, data = rich_pte
    pte = PteFile.parse(data)
    with pytest.raises(FormatError, match="no named data 'nope'"):
        pte.named_data("nope")
    with pytest.raises(FormatError, match="no constant buffer 9"):
        pte.constant_bytes(9)
    with pytest.raises(FormatError, match="past the end"):
        pte.constant_bytes(3, nbytes=10**6)
    with pytest.raises(FormatError, match="segment 99"):
        pte.segment_bytes(99)
    with pytest.raises(FormatError, match="mutable data segment 1"):
        pte.mutable_bytes(0, mutable_segment_idx=1)


def test_parse_accepts_mmap_and_memoryview(tmp_path, et_pte):
    import mmap

    path = tmp_path / "m.pte"
    path.write_bytes(et_pte)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pte = PteFile.parse(mm)
        assert len(pte.constant_bytes(1)) == 5120
        del pte
    assert PteFile.parse(memoryview(et_pte)).program.execution_plan[0].name == "forward"
