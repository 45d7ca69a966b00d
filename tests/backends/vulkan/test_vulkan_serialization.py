"""The Vulkan blob format (torch-free): VkGraph <-> VK00 flatbuffer, the VH00 header, and the
checked reader's answer to corrupt blobs."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from edgetorch.backends.vulkan.serialization import vulkan_graph_schema as vk
from edgetorch.backends.vulkan.serialization.vulkan_graph_serialize import (
    VulkanDelegateHeader,
    convert_to_flatbuffer,
    deserialize_vulkan_graph,
    flatbuffer_to_vk_graph,
    serialize_vulkan_graph,
)
from edgetorch.errors import FormatError


def _graph(constants: bool = True) -> vk.VkGraph:
    t = vk.VkTensor(vk.VkDataType.FLOAT32, [1, 3, 4], -1, 0, vk.VkStorageType.TEXTURE_3D,
                    vk.VkMemoryLayout.TENSOR_CHANNELS_PACKED, vk.VkDataType.FLOAT32)
    w = vk.VkTensor(vk.VkDataType.FLOAT16, [4], 0, -1)
    values = [vk.VkValue(v) for v in (
        t, w, vk.Int(-3), vk.Double(1.5), vk.Bool(True), vk.IntList([1, -2]),
        vk.DoubleList([0.25]), vk.BoolList([True, False]), vk.ValueList([0, 1]),
        vk.String("none"), vk.SymInt(7), vk.Null(), t)]
    return vk.VkGraph(
        chain=[vk.OperatorCall(0, "aten.add.Tensor", [0, 1, 2, 12])], values=values,
        input_ids=[0], output_ids=[12],
        constants=[vk.VkBytes(vk.NAMED_DATA_OFFSET, 8, "a" * 64), vk.VkBytes(0, 0)]
        if constants else [])


def test_graph_round_trips_through_the_flatbuffer():
    g = _graph()
    fb = convert_to_flatbuffer(g)
    assert fb[4:8] == b"VK00"
    assert flatbuffer_to_vk_graph(fb) == g


def test_blob_layout_is_executorchs():
    blob = serialize_vulkan_graph(_graph(False), [("a" * 64, 8), None,
                                                  np.frombuffer(b"\x01\x02\x03", np.uint8)])
    h = VulkanDelegateHeader.parse(blob)
    assert blob[:4] == b"\0\0\0\0" and blob[4:8] == b"VH00"
    assert struct.unpack_from("<H", blob, 8)[0] == 30 and h.flatbuffer_offset == 32
    # a kept tensor is padded to 16 inside the raw bytes, as ExecuTorch pads it
    assert h.bytes_offset == 32 + -(-h.flatbuffer_size // 16) * 16 and h.bytes_size == 16
    assert len(blob) % 16 == 0
    parsed = deserialize_vulkan_graph(blob)
    assert parsed.graph.constants == [vk.VkBytes(vk.NAMED_DATA_OFFSET, 8, "a" * 64),
                                      vk.VkBytes(0, 0), vk.VkBytes(0, 3)]
    assert parsed.graph.values == _graph().values
    assert bytes(parsed.raw_bytes) == b"\x01\x02\x03" + b"\0" * 13


def _corrupt(blob: bytes, offset: int, fmt: str, value: int) -> bytes:
    b = bytearray(blob)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


@pytest.mark.parametrize("make, match", [
    (lambda b: b[:20], "shorter than its 30-byte header"),
    (lambda b: b[:4] + b"XH00" + b[8:], "magic"),
    (lambda b: _corrupt(b, 8, "<H", 12), "header length"),
    (lambda b: _corrupt(b, 14, "<I", 0), "empty"),
    (lambda b: _corrupt(b, 14, "<I", 1 << 30), "outside|overlap"),
    (lambda b: _corrupt(b, 22, "<Q", 1 << 40), "past the blob"),
    (lambda b: b[:60], "past the blob|outside"),
])
def test_corrupt_headers_are_refused(make, match):
    blob = serialize_vulkan_graph(_graph(False))
    with pytest.raises(FormatError, match=match):
        deserialize_vulkan_graph(make(blob))


def test_random_bytes_never_crash_the_reader():
    blob = bytearray(serialize_vulkan_graph(_graph(False)))
    rng = np.random.default_rng(0)
    for _ in range(300):
        b = bytearray(blob)
        for i in rng.integers(32, len(b), size=4):
            b[i] = int(rng.integers(0, 256))
        try:
            deserialize_vulkan_graph(bytes(b))
        except FormatError:
            pass
