"""The XNNPACK delegate blob format: byte-identical round trips with ExecuTorch 1.5.1's blobs,
the XH00 header, and ExecuTorch's own serializer on a graph using every schema table."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import ref_process
from refenv import _clean_env, ref_available, ref_python
from xnn_helpers import MODELS, every_table_graph, executorch_json

from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.serialization import (
    XNNHeader,
    deserialize_xnnpack_binary,
    serialize_xnnpack_binary,
    xnngraph_from_flatbuffer,
    xnngraph_to_flatbuffer,
)
from edgetorch.schema.pte import PteFile

REF_SCRIPT = Path(__file__).with_name("xnn_ref.py")


def _blobs(pte_bytes: bytes) -> list[memoryview]:
    pte = PteFile.parse(pte_bytes)
    return [pte.delegate_bytes(d) for plan in pte.program.execution_plan for d in plan.delegates
            if d.id == "XnnpackBackend"]


def test_fixture_blob_round_trips_byte_identical(tiny_pte):
    (blob,) = _blobs(tiny_pte)
    parsed = deserialize_xnnpack_binary(blob)
    assert serialize_xnnpack_binary(parsed.graph, parsed.constant_data) == bytes(blob)
    fb = blob[parsed.header.flatbuffer_offset:][: parsed.header.flatbuffer_size]
    assert xnngraph_to_flatbuffer(xnngraph_from_flatbuffer(fb)) == bytes(fb)


def test_fixture_blob_contents(tiny_pte):
    (blob,) = _blobs(tiny_pte)
    parsed = deserialize_xnnpack_binary(blob)
    assert parsed.header == XNNHeader(32, 1568, 1600, 0)
    assert bytes(blob[:10]) == b"\0\0\0\0XH00\x1e\0"
    g = parsed.graph
    assert [type(n.xnode_union) for n in g.xnodes] == [x.XNNFullyConnected] * 3
    assert g.xnodes[0].output_min_max == x.OutputMinMax(0.0, math.inf)  # fused ReLU
    assert (g.num_externs, g.input_ids, g.output_ids) == (2, [0], [9])
    assert g.constant_data[0] == x.ConstantDataOffset(0, 0, "")
    pte = PteFile.parse(tiny_pte)
    for entry in g.constant_data[1:]:
        assert entry.offset == x.UINT64_MAX and len(entry.named_key) == 64
        assert len(pte.named_data(entry.named_key)) == entry.size


def test_every_table_round_trips():
    g = every_table_graph()
    blob = serialize_xnnpack_binary(g, b"\x01" * 48)
    parsed = deserialize_xnnpack_binary(blob)
    assert parsed.graph == g
    assert bytes(parsed.constant_data) == b"\x01" * 48
    assert serialize_xnnpack_binary(parsed.graph, parsed.constant_data) == blob


def test_header_layout_and_alignment():
    g = every_table_graph()
    fb = xnngraph_to_flatbuffer(g)
    blob = serialize_xnnpack_binary(g, b"abc")
    h = XNNHeader.parse(blob)
    assert h.flatbuffer_offset == 32 and h.flatbuffer_size == len(fb)
    assert h.constant_data_offset == 32 + -(-len(fb) // 16) * 16
    assert h.constant_data_size == 3 and blob.endswith(b"abc")
    assert blob[h.flatbuffer_offset:][: len(fb)] == fb
    assert XNNHeader.parse(fb) is None  # a bare flatbuffer has no header
    assert fb[4:8] == x.FILE_IDENTIFIER


def test_bare_flatbuffer_and_legacy_constant_buffer():
    g = dataclasses.replace(every_table_graph(), constant_buffer=[b"", b"\x02" * 20],
                            mem_buffer_sizes=[0, 64])
    fb = xnngraph_to_flatbuffer(g, identifier=x.LEGACY_FILE_IDENTIFIER)
    parsed = deserialize_xnnpack_binary(fb)
    assert parsed.header is None and len(parsed.constant_data) == 0
    assert [bytes(b) for b in parsed.graph.constant_buffer] == [b"", b"\x02" * 20]
    assert parsed.graph.mem_buffer_sizes == [0, 64]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.compat
def test_executorch_blobs_round_trip(name, xnnpack_exports):
    pte = xnnpack_exports.get(name).pte.read_bytes()
    blobs = _blobs(pte)
    assert blobs, f"ExecuTorch delegated nothing of {name} to XNNPACK"
    for blob in blobs:
        parsed = deserialize_xnnpack_binary(blob)
        assert serialize_xnnpack_binary(parsed.graph, parsed.constant_data) == bytes(blob)


@pytest.mark.compat
@pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available")
def test_executorch_serializer_writes_our_bytes(tmp_path):
    """ExecuTorch's serialize_xnnpack_binary (flatc) on the same graph gives our bytes."""
    g = every_table_graph()
    (tmp_path / "graph.json").write_text(executorch_json(g))
    ref_process.run([str(ref_python()), str(REF_SCRIPT), "serialize", str(tmp_path / "graph.json"),
                    str(tmp_path / "et.bin")], env=_clean_env(), check=True,
                    capture_output=True, timeout=600)
    assert (tmp_path / "et.bin").read_bytes() == serialize_xnnpack_binary(g)
