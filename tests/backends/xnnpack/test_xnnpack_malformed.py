"""Malformed XNNPACK blobs raise FormatError (or another typed edgetorch error), never crash,
hang or allocate what the blob merely claims."""

from __future__ import annotations

import dataclasses
import random
import struct

import numpy as np
import pytest
from xnn_helpers import GraphBuilder

from edgetorch.backends.xnnpack import XnnpackBackend
from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.runtime.backend import compile_blob
from edgetorch.backends.xnnpack.serialization import (
    XNNHeader,
    deserialize_xnnpack_binary,
    serialize_xnnpack_binary,
    xnngraph_to_flatbuffer,
)
from edgetorch.errors import EdgeTorchError, FormatError, InvalidProgramError
from edgetorch.schema.pte import PteFile


@pytest.fixture(scope="module")
def tiny(tiny_pte):
    pte = PteFile.parse(tiny_pte)
    blob = bytes(pte.delegate_bytes(pte.program.execution_plan[0].delegates[0]))
    return blob, pte.named_data


def _load(blob: bytes, named_data):
    return compile_blob(deserialize_xnnpack_binary(blob), named_data)


def test_every_truncation_is_a_format_error(tiny):
    blob, named = tiny
    for n in range(len(blob)):
        with pytest.raises(FormatError):
            _load(blob[:n], named)


def test_truncated_bare_flatbuffers_fail_cleanly(tiny):
    blob, named = tiny
    h = XNNHeader.parse(blob)
    fb = blob[h.flatbuffer_offset :][: h.flatbuffer_size]
    for n in range(0, len(fb), 7):
        try:
            _load(fb[:n], named)
        except EdgeTorchError:
            pass


def test_random_corruption_fails_cleanly(tiny):
    blob, named = tiny
    rng = random.Random(0)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(1500):
        data = bytearray(blob)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            _load(bytes(data), named)
            outcomes["ok"] += 1
        except EdgeTorchError:
            outcomes["error"] += 1
    assert outcomes["error"] > 100, outcomes


@pytest.mark.parametrize("field, value, message", [
    ("MAGIC", b"XH01", "identifier"),  # no header magic: read as a (wrong) bare flatbuffer
    ("flatbuffer_offset", 4000, "outside"),
    ("flatbuffer_size", 4, "prefix"),
    ("constant_data_offset", 40, "overlaps"),
    ("constant_data_size", 1 << 40, "outside"),
])
def test_bad_header(tiny, field, value, message):
    blob, named = tiny
    data = bytearray(blob)
    offsets = {"MAGIC": (4, "4s"), "flatbuffer_offset": (10, "<I"), "flatbuffer_size": (14, "<I"),
               "constant_data_offset": (18, "<I"), "constant_data_size": (22, "<Q")}
    at, fmt = offsets[field]
    struct.pack_into(fmt, data, at, value)
    with pytest.raises(FormatError, match=message):
        _load(bytes(data), named)


def test_wrong_flatbuffer_identifier():
    fb = bytearray(xnngraph_to_flatbuffer(x.XNNGraph()))
    fb[4:8] = b"XN99"
    with pytest.raises(FormatError, match="identifier b'XN99'"):
        deserialize_xnnpack_binary(bytes(fb))


def _graph() -> GraphBuilder:
    b = GraphBuilder()
    i, w = b.input(2, 3), b.const(np.ones((4, 3), np.float32))
    o = b.output(2, 4)
    b.node(x.XNNFullyConnected(i, w, x.XNN_INVALID_VALUE_ID, o))
    return b


def _init(graph: x.XNNGraph, named: dict, constant_data: bytes = b""):
    class Ctx:
        named_data = staticmethod(named.__getitem__)

    return XnnpackBackend().init(serialize_xnnpack_binary(graph, constant_data), {}, Ctx())


def test_node_referring_to_a_missing_value():
    b = _graph()
    g = b.build()
    g.xnodes[0].xnode_union.filter_id = 77
    with pytest.raises(FormatError, match="filter id 77"):
        _init(g, b.named)


def test_constant_index_out_of_range():
    b = _graph()
    g = b.build()
    g.xvalues[1].xvalue_union.constant_buffer_idx = 9
    with pytest.raises(FormatError, match="constant 9 is out of range"):
        _init(g, b.named)


def test_constant_smaller_than_its_dims():
    b = _graph()
    g = b.build()
    g.xvalues[1].xvalue_union.dims = [4000, 3000]
    with pytest.raises(FormatError, match="need"):
        _init(g, b.named)


def test_in_blob_constant_outside_the_constant_region():
    b = _graph()
    g = b.build()
    g.constant_data[1] = x.ConstantDataOffset(0, 48, None)
    _init(g, {}, b"\0" * 48)  # in the blob's constant data: fine
    g.constant_data[1] = x.ConstantDataOffset(16, 48, None)
    with pytest.raises(FormatError, match="outside"):
        _init(g, {}, b"\0" * 48)


def test_missing_named_key():
    b = _graph()
    with pytest.raises(InvalidProgramError, match="named data"):
        _init(b.build(), {"other": b""})


def test_duplicate_ids_and_bad_externals():
    b = _graph()
    g = b.build()
    g.xvalues[2].xvalue_union.id_out = 0
    with pytest.raises(FormatError, match="defined twice"):
        _init(g, b.named)
    g = b.build()
    g.xvalues[0].xvalue_union.external_id = 5
    with pytest.raises(FormatError, match="external id 5"):
        _init(g, b.named)
    g = b.build()
    g.xvalues[0].xvalue_union.flags = 0x10
    with pytest.raises(FormatError, match="flag"):
        _init(g, b.named)
    g = dataclasses.replace(b.build(), num_externs=100_000)
    with pytest.raises(FormatError, match="external values"):
        _init(g, b.named)


def test_attributes_that_do_not_fit_the_values():
    b = GraphBuilder()
    i, o = b.input(2, 3), b.output(3, 2)
    b.node(x.XNNStaticTranspose(3, [2, 0, 1], i, o))
    with pytest.raises(FormatError, match="perm"):
        _init(b.build(), {})
    b = GraphBuilder()
    i, w = b.input(1, 5, 5, 3), b.const(np.ones((4, 3, 3, 3), np.float32))
    o = b.output(1, 5, 5, 4)
    b.node(x.XNNConv2d(1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 3, 4, 1, 0, 0, i, w, x.XNN_INVALID_VALUE_ID,
                       o))
    with pytest.raises(FormatError, match="filter dims"):
        _init(b.build(), b.named)


def test_union_tag_out_of_range():
    fb = bytearray(xnngraph_to_flatbuffer(_graph().build()))
    tag = x.XNODE_UNION.index(x.XNNFullyConnected) + 1
    # The XNode table's union type byte: find the one byte equal to the tag right before a
    # u32 debug handle of 1 would be fragile; corrupt every byte equal to the tag in turn.
    hits = 0
    for pos in [p for p, v in enumerate(fb) if v == tag]:
        data = bytearray(fb)
        data[pos] = 200
        try:
            deserialize_xnnpack_binary(bytes(data))
        except FormatError as e:
            hits += "union type tag 200" in str(e)
    assert hits >= 1
