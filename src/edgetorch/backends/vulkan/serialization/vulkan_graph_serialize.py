"""Vulkan delegate blobs: the ``VH00`` header, the ``VkGraph`` flatbuffer and raw bytes.

Blob layout (ExecuTorch 1.5.1, ``vulkan_graph_serialize.py`` and ``VulkanDelegateHeader.cpp``)::

    [0:4]    zeros (the magic sits where a bare flatbuffer's identifier would)
    [4:8]    b"VH00"
    [8:10]   u16 header length (30)
    [10:14]  u32 flatbuffer offset   (30 rounded up to 16 = 32)
    [14:18]  u32 flatbuffer size
    [18:22]  u32 raw bytes offset    (flatbuffer offset + flatbuffer size rounded up to 16)
    [22:30]  u64 raw bytes size
    then zero padding, the flatbuffer (identifier ``VK00``), padding, the raw bytes, padding.

ExecuTorch 1.5.1 leaves the raw bytes empty: every constant is a ``VkBytes`` whose
``named_key`` (the SHA-256 of its bytes) names the program's named data. ExecuTorch builds the
flatbuffer with ``flatc`` from JSON; ``VULKAN_SCHEMA`` declares ``schema.fbs`` for the engine in
``edgetorch.schema.fbs`` in flatc's write order, so the bytes are ExecuTorch's, and its checked
reader turns corrupt blobs into ``FormatError``. Torch-free.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ....errors import FormatError
from ....schema.fbs import (
    BOOL,
    BYTE,
    DOUBLE,
    FLATC,
    INT,
    LONG,
    STRING,
    UBYTE,
    UINT,
    ULONG,
    Enum,
    F,
    Schema,
    Union,
    aligned,
    as_byte_view,
)
from . import vulkan_graph_schema as vk

_HINT = ("The delegate blob is truncated or corrupted, or was not written for the Vulkan "
         "backend; re-export the model.")

ALIGNMENT = 16  # of the header's end, the flatbuffer and the raw bytes

VULKAN_SCHEMA = Schema(
    "Vulkan schema.fbs",
    FLATC,  # ExecuTorch writes the graph with flatc from JSON
    {
        vk.OperatorCall: [F("node_id", UINT), F("name", STRING), F("args", [INT])],
        vk.VkTensor: [
            F("datatype", Enum(vk.VkDataType, BYTE)),
            F("dims", [UINT]),
            F("constant_id", INT),
            F("mem_obj_id", INT),
            F("storage_type", Enum(vk.VkStorageType, UBYTE), default=255),
            F("memory_layout", Enum(vk.VkMemoryLayout, UBYTE), default=255),
            F("staging_datatype", Enum(vk.VkDataType, BYTE), default=127),
        ],
        vk.Null: [],
        vk.Int: [F("int_val", LONG)],
        vk.Bool: [F("bool_val", BOOL)],
        vk.Double: [F("double_val", DOUBLE)],
        vk.String: [F("string_val", STRING)],
        vk.IntList: [F("items", [LONG])],
        vk.DoubleList: [F("items", [DOUBLE])],
        vk.BoolList: [F("items", [BOOL])],
        vk.ValueList: [F("items", [INT])],
        vk.SymInt: [F("value", INT)],
        vk.VkValue: [F("value", Union(vk.GRAPH_TYPES))],
        vk.VkBytes: [F("offset", ULONG), F("length", ULONG),
                     F("named_key", STRING, optional=True)],
        vk.VkGraph: [
            F("version", STRING),
            F("chain", [vk.OperatorCall]),
            F("values", [vk.VkValue]),
            F("input_ids", [UINT]),
            F("output_ids", [UINT]),
            F("constants", [vk.VkBytes]),
            F("shaders", [vk.VkBytes]),
            F("storage_type_override", Enum(vk.VkStorageType, UBYTE), default=255),
            F("memory_layout_override", Enum(vk.VkMemoryLayout, UBYTE), default=255),
        ],
    },
)


def vkgraph_to_flatbuffer(graph: vk.VkGraph) -> bytes:
    """The flatbuffer bytes ExecuTorch's ``convert_to_flatbuffer`` makes for ``graph``."""
    return VULKAN_SCHEMA.write(graph, identifier=vk.FILE_IDENTIFIER)


def vkgraph_from_flatbuffer(data: bytes | bytearray | memoryview) -> vk.VkGraph:
    """Parse a ``VkGraph`` flatbuffer (identifier ``VK00``), checking every offset."""
    return VULKAN_SCHEMA.read(data, vk.VkGraph, identifiers=(vk.FILE_IDENTIFIER,),
                              what="Vulkan graph flatbuffer", hint=_HINT)


@dataclass(frozen=True)
class VulkanDelegateHeader:
    """The 30-byte ``VH00`` header at the start of a Vulkan delegate blob."""

    flatbuffer_offset: int
    flatbuffer_size: int
    bytes_offset: int
    bytes_size: int

    MAGIC = b"VH00"
    LENGTH = 30
    _LAYOUT = struct.Struct("<4s4sHIIIQ")  # zeros, magic, length, fb off/size, bytes off/size

    def to_bytes(self) -> bytes:
        if self.flatbuffer_size <= 0 or self.bytes_offset < self.flatbuffer_offset \
                + self.flatbuffer_size:
            raise FormatError(f"invalid Vulkan delegate header {self}: the flatbuffer must be "
                              "non-empty and the raw bytes must follow it")
        try:
            return self._LAYOUT.pack(b"\0\0\0\0", self.MAGIC, self.LENGTH,
                                     self.flatbuffer_offset, self.flatbuffer_size,
                                     self.bytes_offset, self.bytes_size)
        except struct.error as e:
            raise FormatError(f"invalid Vulkan delegate header {self}: {e}") from None

    @classmethod
    def parse(cls, blob: bytes | bytearray | memoryview) -> VulkanDelegateHeader:
        """The header of ``blob``, checked as ExecuTorch's runtime checks it (header length
        at least 30, flatbuffer after the header and non-empty, raw bytes after it), plus:
        both regions lie inside the blob."""
        view = as_byte_view(blob, "Vulkan delegate blob")
        if len(view) < cls.LENGTH:
            raise FormatError(f"Vulkan delegate blob is {len(view)} bytes, shorter than its "
                              f"{cls.LENGTH}-byte header. {_HINT}")
        if bytes(view[4:8]) != cls.MAGIC:
            raise FormatError(f"Vulkan delegate blob has magic {bytes(view[4:8])!r} where "
                              f"{cls.MAGIC!r} belongs. {_HINT}")
        _, _, length, fb_off, fb_size, b_off, b_size = cls._LAYOUT.unpack_from(view, 0)
        header = cls(fb_off, fb_size, b_off, b_size)
        problem = None
        if length < cls.LENGTH:
            problem = f"header length {length} < {cls.LENGTH}"
        elif fb_off < length or fb_size == 0:
            problem = "the flatbuffer region is empty or overlaps the header"
        elif b_off < fb_off + fb_size:
            problem = "the raw bytes overlap the flatbuffer"
        elif fb_off + fb_size > len(view) or b_off + b_size > len(view):
            problem = f"a region ends past the blob's {len(view)} bytes"
        if problem:
            raise FormatError(f"invalid Vulkan delegate header {header}: {problem}. {_HINT}")
        return header


@dataclass
class VulkanBlob:
    """A parsed blob: the header, the graph and a zero-copy view of the raw bytes."""

    header: VulkanDelegateHeader
    graph: vk.VkGraph
    raw_bytes: memoryview


def _pad(data: bytes, size: int) -> bytes:
    return data + b"\0" * (size - len(data))


def serialize_vulkan_graph(graph: vk.VkGraph, raw_bytes: bytes = b"") -> bytes:
    """Header + flatbuffer + ``raw_bytes`` (constants kept in the blob), each padded to 16."""
    fb = vkgraph_to_flatbuffer(graph)
    header_len = aligned(VulkanDelegateHeader.LENGTH, ALIGNMENT)
    fb_len = aligned(len(fb), ALIGNMENT)
    header = VulkanDelegateHeader(header_len, len(fb), header_len + fb_len, len(raw_bytes))
    return b"".join([_pad(header.to_bytes(), header_len), _pad(fb, fb_len),
                     _pad(bytes(raw_bytes), aligned(len(raw_bytes), ALIGNMENT))])


def deserialize_vulkan_graph(blob: bytes | bytearray | memoryview) -> VulkanBlob:
    """Parse a Vulkan delegate blob; corruption raises ``FormatError``."""
    view = as_byte_view(blob, "Vulkan delegate blob")
    h = VulkanDelegateHeader.parse(view)
    graph = vkgraph_from_flatbuffer(view[h.flatbuffer_offset:h.flatbuffer_offset
                                         + h.flatbuffer_size])
    return VulkanBlob(h, graph, view[h.bytes_offset:h.bytes_offset + h.bytes_size])
