"""Header fields and offsets of .pte, .ptd and XNNPACK blobs are checked against each other.

Each case is a valid file with one field made inconsistent with the rest; each must be a
typed error before any data is read or allocated (issue 13, loader hardening).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.serialization import (
    deserialize_xnnpack_binary,
    serialize_xnnpack_binary,
)
from edgetorch.errors import ExternalDataError, FormatError
from edgetorch.runtime import Runtime
from edgetorch.schema import program as s
from edgetorch.schema.flatbuffer import program_to_flatbuffer
from edgetorch.schema.ptd import PtdFile
from edgetorch.schema.pte import ExtendedHeader, PteFile

# .pte extended header: program_size @16, segment_base_offset @24, segment_data_size @32.
# .ptd FH01 header: flatbuffer_offset @16, flatbuffer_size @24, segment_base_offset @32,
# segment_data_size @40. XH00: flatbuffer offset @10, size @14, constant data offset @18.


def _patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_valid_files_parse(et_pte, et_ptd):
    pte = PteFile.parse(et_pte)
    assert pte.segment_base >= pte.program_size and pte.program.segments
    PtdFile.parse(et_ptd)


def test_pte_segment_base_zero_is_an_error_not_nan(et_pte):
    # The fuzzing finding of issue 13: constants read from byte 0 and the output was NaN.
    data = _patch(et_pte, 24, "<Q", 0)
    with pytest.raises(FormatError, match="segment base offset is 0"):
        PteFile.parse(data)
    with pytest.raises(FormatError, match="segment base offset is 0"):
        Runtime.get().load_program(data)


def test_pte_segment_base_zero_without_data_size(et_pte):
    # An older header (segment_data_size 0) whose base is 0 while segments hold data.
    data = _patch(_patch(et_pte, 24, "<Q", 0), 32, "<Q", 0)
    with pytest.raises(FormatError, match="segments with data"):
        PteFile.parse(data)


def test_pte_segment_base_inside_the_flatbuffer(et_pte):
    program_size = PteFile.parse(et_pte).program_size
    data = _patch(et_pte, 24, "<Q", program_size - 16)
    with pytest.raises(FormatError, match="segment base offset .* is outside"):
        PteFile.parse(data)


def test_pte_program_size_past_segment_base(et_pte):
    # The flatbuffer would run into the segment data.
    pte = PteFile.parse(et_pte)
    data = _patch(et_pte, 16, "<Q", pte.segment_base + 8)
    with pytest.raises(FormatError, match="segment base offset .* is outside"):
        PteFile.parse(data)


def test_pte_segment_data_past_end_of_file(et_pte):
    data = _patch(et_pte, 32, "<Q", len(et_pte))
    with pytest.raises(FormatError, match="truncated"):
        PteFile.parse(data)


def test_pte_segment_past_segment_data(et_pte):
    # segment_data_size smaller than the segments the program lists.
    data = _patch(et_pte, 32, "<Q", 1)
    with pytest.raises(FormatError, match="ends past the segment data"):
        PteFile.parse(data)


def _pte_with_segment(segment: s.DataSegment, base_delta: int = 0) -> bytes:
    fb = program_to_flatbuffer(s.Program(version=0, execution_plan=[], segments=[segment]))
    program_size = 32 + len(fb)
    base = -(-program_size // 128) * 128 + base_delta
    (root,) = struct.unpack_from("<I", fb, 0)
    header = ExtendedHeader(program_size, base, 64).to_bytes()
    body = struct.pack("<I", root + 32) + fb[4:8] + header + fb[8:]
    return body + bytes(base + 64 - len(body))


@pytest.mark.parametrize(
    ("segment", "message"),
    [
        (s.DataSegment(0, 65), "ends past"),
        (s.DataSegment(60, 8), "ends past"),
        (s.DataSegment(2**64 - 1, 2), "ends past"),
    ],
)
def test_pte_segment_ranges_inside_the_file(segment, message):
    assert PteFile.parse(_pte_with_segment(s.DataSegment(0, 64))).segment_bytes(0)
    with pytest.raises(FormatError, match=message):
        PteFile.parse(_pte_with_segment(segment))


def test_ptd_segment_base_inside_the_flatbuffer(et_ptd):
    (fb_offset, fb_size) = struct.unpack_from("<QQ", et_ptd, 16)
    data = _patch(et_ptd, 32, "<Q", fb_offset + fb_size - 16)
    with pytest.raises(ExternalDataError, match="segment data at"):
        PtdFile.parse(data)


def test_ptd_flatbuffer_inside_the_header(et_ptd):
    data = _patch(et_ptd, 16, "<Q", 16)
    with pytest.raises(ExternalDataError, match="inside the header"):
        PtdFile.parse(data)


def test_ptd_segments_past_segment_data(et_ptd):
    data = _patch(et_ptd, 40, "<Q", 0)
    with pytest.raises(ExternalDataError, match="ends past the 0 bytes of segment data"):
        PtdFile.parse(data)


def _xnn_blob() -> bytes:
    return serialize_xnnpack_binary(
        x.XNNGraph(constant_data=[x.ConstantDataOffset(0, 0, ""), x.ConstantDataOffset(0, 8)]),
        np.arange(2, dtype=np.float32).tobytes(),
    )


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "message"),
    [
        (10, "<I", 8, "overlaps the 30-byte header"),
        (10, "<I", 1 << 31, "outside"),
        (14, "<I", 1 << 20, "outside"),
        (18, "<I", 40, "overlaps the flatbuffer"),
        (18, "<I", 1 << 20, "outside"),
        (22, "<Q", 9, "outside"),
    ],
)
def test_xnnpack_header_fields_checked_against_each_other(offset, fmt, value, message):
    blob = _xnn_blob()
    assert bytes(deserialize_xnnpack_binary(blob).constant_data) == np.arange(2, dtype="f4").tobytes()
    with pytest.raises(FormatError, match=message):
        deserialize_xnnpack_binary(_patch(blob, offset, fmt, value))
