"""The Core ML delegate's containers (torch-free): the flattened directory (ExecuTorch's
``inmemoryfs``) and the checked protobuf reader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgetorch.backends.apple.coreml import inmemoryfs
from edgetorch.backends.apple.coreml.runtime.protobuf import Field, decode, message
from edgetorch.errors import FormatError


def _tree() -> inmemoryfs.Directory:
    return inmemoryfs.Directory("lowered_module", {
        "metadata.json": b'{"inputNames": ["x"]}',
        "model.mlpackage": inmemoryfs.Directory("model.mlpackage", {
            "Manifest.json": b"{}", "Data": inmemoryfs.Directory("Data", {"w.bin": b"\x00" * 5})}),
    })


def test_flatten_round_trips_and_ends_with_the_reversed_index():
    blob = inmemoryfs.flatten(_tree())
    assert blob.endswith(b"{")  # '{"nodes":...}' written backwards
    index = json.loads(inmemoryfs._index_text(memoryview(blob)))
    assert index["nodes"][-1]["name"] == "lowered_module"
    assert index["nodes"][0] == {"children": {}, "dataRegion": {"offset": 0, "size": 21},
                                 "kind": 0, "name": "metadata.json"}
    root = inmemoryfs.unflatten(blob)
    assert {k: bytes(v) for k, v in root.files().items()} == {
        "metadata.json": b'{"inputNames": ["x"]}', "model.mlpackage/Data/w.bin": b"\x00" * 5,
        "model.mlpackage/Manifest.json": b"{}"}


def test_executorchs_layout_reads_whatever_the_order_and_padding():
    # files out of name order, aligned to 8, zero padding before the index, as ExecuTorch's
    # unordered_map and page alignment can produce
    nodes = [{"children": {}, "dataRegion": {"offset": 8, "size": 3}, "kind": 0, "name": "b"},
             {"children": {}, "dataRegion": {"offset": 0, "size": 2}, "kind": 0, "name": "a"},
             {"children": {"b": 0, "a": 1}, "dataRegion": {"offset": 0, "size": 0}, "kind": 1,
              "name": "root"}]
    body = b"AA" + b"\0" * 6 + b"BBB" + b"\0" * 5
    blob = body + json.dumps({"nodes": nodes}, separators=(",", ":")).encode()[::-1] + b"\0" * 3
    files = inmemoryfs.unflatten(blob).files()
    assert bytes(files["a"]) == b"AA" and bytes(files["b"]) == b"BBB"


@pytest.mark.parametrize("blob", [
    b"", b"\0\0\0", b"no index here", b"}{",
    json.dumps({"nodes": [{"children": {}, "dataRegion": {"offset": 0, "size": 99}, "kind": 0,
                           "name": "f"}, {"children": {"f": 0}, "kind": 1, "name": "r",
                                          "dataRegion": {}}]}).encode()[::-1],
    json.dumps({"nodes": [{"children": {"x": 5}, "dataRegion": {}, "kind": 1, "name": "r"}]})
    .encode()[::-1],
    json.dumps({"nodes": [{"children": {}, "dataRegion": {}, "kind": 7, "name": "r"}]})
    .encode()[::-1],
])
def test_corrupt_blobs_are_refused(blob):
    with pytest.raises(FormatError):
        inmemoryfs.unflatten(blob)


def test_random_damage_never_crashes_the_reader():
    blob = bytearray(inmemoryfs.flatten(_tree()))
    rng = np.random.default_rng(0)
    for _ in range(300):
        b = bytearray(blob)
        for i in rng.integers(0, len(b), size=3):
            b[i] = int(rng.integers(0, 256))
        try:
            inmemoryfs.unflatten(bytes(b)).files()
        except FormatError:
            pass


INNER = message(f1=Field("v", "float", True), f2=Field("n", "sint64"))
OUTER = message(f1=Field("name", "string"), f2=Field("inner", "message", True, INNER),
                f3=Field("m", "map", schema=message(f1=Field("key", "string"),
                                                    f2=Field("value", "int"))))


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_reader_decodes_packed_maps_and_negative_ints():
    packed = np.array([1.5, -2.0], "<f4").tobytes()
    inner = _len(1, packed) + _varint(2 << 3) + _varint(-5)
    entry = _len(1, b"k") + _varint(2 << 3) + _varint(7)
    msg = _len(1, b"hi") + _len(2, inner) + _len(2, b"") + _len(3, entry) + \
        _varint(9 << 3) + _varint(1)  # an unknown field is skipped
    assert decode(msg, OUTER, "Outer") == {
        "name": "hi", "inner": [{"v": [1.5, -2.0], "n": -5}, {}], "m": {"k": 7}}


@pytest.mark.parametrize("msg, match", [
    (_varint(1 << 3 | 2) + _varint(50) + b"xx", "claims 50 bytes"),
    (_varint(2 << 3 | 2) + _varint(3) + _varint(1 << 3 | 2) + b"\x07", "claims"),
    (b"\xff" * 11, "varint"),
    (_varint(1 << 3 | 3), "wire type 3"),
    (_len(1, b"\xff\xfe"), "UTF-8"),
])
def test_protobuf_reader_refuses_corrupt_messages(msg, match):
    with pytest.raises(FormatError, match=match):
        decode(msg, OUTER, "Outer")


def test_protobuf_nesting_is_bounded():
    deep = message(f1=Field("child", "message", schema=None))
    deep[1] = Field("child", "message", schema=deep)
    msg = b""
    for _ in range(150):
        msg = _len(1, msg)
    with pytest.raises(FormatError, match="nest"):
        decode(msg, deep, "Deep")
