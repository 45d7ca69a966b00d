"""The .ptd FlatTensor container: ExecuTorch's file, round trips, hostile inputs."""

from __future__ import annotations

import random
import struct

import pytest

from edgetorch.errors import ExternalDataError
from edgetorch.schema.ptd import FlatTensorHeader, PtdFile, TensorLayout, serialize_ptd
from edgetorch.schema.scalar_type import ScalarType

# The inputs ExecuTorch's FlatTensorSerializer was given for tests/fixtures/et_named_tensors.ptd.
_B0, _B1, _B2 = bytes(range(24)), b"\x01" * 40, bytes(7)
ET_INPUTS = {
    "linear.weight": (_B0, ScalarType.FLOAT, [2, 3], [0, 1], 16),
    "linear.bias": (_B1, ScalarType.LONG, [5], [0]),
    "alias": (_B0, ScalarType.FLOAT, [6], [0]),
    "blob": (_B2, None, None, None, 64),
    "scalar": (_B1, ScalarType.BYTE, [], []),
}


def test_reads_executorch_file(et_ptd):
    ptd = PtdFile.parse(et_ptd)
    assert ptd.keys() == list(ET_INPUTS)
    assert ptd.header == FlatTensorHeader(48, 472, 640, 263)
    data, layout = ptd.get("linear.weight")
    assert data == _B0 and layout == TensorLayout(ScalarType.FLOAT, [2, 3], [0, 1])
    assert data.obj is et_ptd
    assert ptd.get("blob") == (_B2, None)
    # Identical data is stored once.
    assert (
        ptd.flat_tensor.named_data[2].segment_index == ptd.flat_tensor.named_data[0].segment_index
    )
    assert "alias" in ptd and "nope" not in ptd and len(ptd) == 5


def test_writer_is_byte_identical_to_executorch(et_ptd):
    assert serialize_ptd(ET_INPUTS) == et_ptd


def test_round_trip_and_alignment():
    np = pytest.importorskip("numpy")
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensors = {
        "w": (weight, ScalarType.FLOAT, [3, 4], [0, 1]),
        "b": (b"\x00" * 8, ScalarType.LONG, [1], [0]),
        "opaque": (b"xyz", None, None, None),
    }
    data = serialize_ptd(tensors, alignment=256, segment_alignment=64)
    ptd = PtdFile.parse(data)
    view, layout = ptd.get("w")
    assert np.array_equal(np.frombuffer(view, np.float32).reshape(layout.sizes), weight)
    for seg in ptd.flat_tensor.segments:
        assert (ptd.header.segment_base_offset + seg.offset) % 64 == 0
        assert seg.offset % 256 == 0
    assert ptd.header.segment_base_offset % 64 == 0
    assert ptd.get("opaque") == (b"xyz", None)


def test_empty_file():
    ptd = PtdFile.parse(serialize_ptd({}))
    assert ptd.keys() == [] and ptd.header.segment_data_size == 0


def test_missing_key_error(et_ptd):
    with pytest.raises(ExternalDataError, match="no key 'missing'.*linear.weight"):
        PtdFile.parse(et_ptd).get("missing")


def _only_external_data_errors(data: bytes) -> None:
    try:
        ptd = PtdFile.parse(data)
        for key in ptd.keys():
            ptd.get(key)
    except ExternalDataError:
        pass
    except Exception as e:  # noqa: BLE001 - the point is to catch anything else
        pytest.fail(f"{type(e).__name__} instead of ExternalDataError: {e}")


def test_every_truncation(et_ptd):
    for n in range(len(et_ptd)):
        with pytest.raises(ExternalDataError):
            PtdFile.parse(et_ptd[:n])


def test_random_bit_flips(et_ptd):
    rng = random.Random(7)
    for _ in range(500):
        data = bytearray(et_ptd)
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
        _only_external_data_errors(bytes(data))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "message"),
    [
        (4, "4s", b"PT01", "not a .ptd file"),
        (4, "4s", b"FT02", "unsupported .ptd version"),
        (8, "4s", b"eh00", "header magic"),
        (12, "<I", 24, "header length 24"),
        (16, "<Q", 2**63, "places the flatbuffer"),
        (24, "<Q", 2**40, "places the flatbuffer"),
        (32, "<Q", 2**63, "segment data"),
        (40, "<Q", 2**62, "segment data"),
    ],
)
def test_hostile_header_fields(et_ptd, offset, fmt, value, message):
    data = bytearray(et_ptd)
    struct.pack_into(fmt, data, offset, value)
    with pytest.raises(ExternalDataError, match=message):
        PtdFile.parse(bytes(data))


def test_layout_larger_than_segment():
    data = serialize_ptd({"w": (b"\x00" * 8, ScalarType.FLOAT, [4], [0])})
    with pytest.raises(ExternalDataError, match="needs 16 bytes but its segment holds 8"):
        PtdFile.parse(data)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ((b"x", 99, [1], [0]), "invalid layout"),
        ((b"x", ScalarType.BYTE, [2**40], [0]), "TensorLayout.sizes"),
        ((b"x", ScalarType.BYTE, [1], [0], 0), "alignment"),
        (("text", ScalarType.BYTE, [1], [0]), "bytes-like"),
    ],
)
def test_writer_rejects_bad_inputs(value, message):
    with pytest.raises(ExternalDataError, match=message):
        serialize_ptd({"k": value})


def test_dim_order_must_match_sizes():
    data = serialize_ptd({"w": (b"\x00" * 16, ScalarType.FLOAT, [2, 2], [0])})
    with pytest.raises(ExternalDataError, match="dim_order"):
        PtdFile.parse(data)


def test_huge_vector_length(et_ptd):
    # named_data vector (field 2 of the root table) claims 2^31 entries.
    data = bytearray(et_ptd)
    (root,) = struct.unpack_from("<I", data, 0)
    (soffset,) = struct.unpack_from("<i", data, root)
    (field_off,) = struct.unpack_from("<H", data, root - soffset + 4 + 2 * 2)
    pos = root + field_off
    struct.pack_into("<I", data, pos + struct.unpack_from("<I", data, pos)[0], 2**31)
    with pytest.raises(ExternalDataError, match=r"FlatTensor\.named_data.*claims 2147483648"):
        PtdFile.parse(bytes(data))
