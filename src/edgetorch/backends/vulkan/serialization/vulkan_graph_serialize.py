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
from typing import ClassVar

import numpy as np

from ....errors import InvalidHeaderError
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


def convert_to_flatbuffer(vk_graph: vk.VkGraph) -> bytes:
    """The flatbuffer bytes ExecuTorch's ``convert_to_flatbuffer`` (flatc) makes."""
    return VULKAN_SCHEMA.write(vk_graph, identifier=vk.FILE_IDENTIFIER)


def flatbuffer_to_vk_graph(flatbuffers: bytes | bytearray | memoryview) -> vk.VkGraph:
    """Parse a ``VkGraph`` flatbuffer (identifier ``VK00``), checking every offset."""
    return VULKAN_SCHEMA.read(flatbuffers, vk.VkGraph, identifiers=(vk.FILE_IDENTIFIER,),
                              what="Vulkan graph flatbuffer", hint=_HINT)


@dataclass
class VulkanDelegateHeader:
    """The 30-byte ``VH00`` header at the start of a Vulkan delegate blob (ExecuTorch's
    class: ``from_bytes``/``to_bytes`` raise ``InvalidHeaderError``, a ``ValueError``)."""

    MAGIC_IX: ClassVar[slice] = slice(4, 8)
    HEADER_SIZE_IX: ClassVar[slice] = slice(8, 10)
    FLATBUFFER_OFFSET_IX: ClassVar[slice] = slice(10, 14)
    FLATBUFFER_SIZE_IX: ClassVar[slice] = slice(14, 18)
    BYTES_OFFSET_IX: ClassVar[slice] = slice(18, 22)
    BYTES_SIZE_IX: ClassVar[slice] = slice(22, 30)
    EXPECTED_MAGIC: ClassVar[bytes] = b"VH00"
    EXPECTED_LENGTH: ClassVar[int] = 30

    flatbuffer_offset: int
    flatbuffer_size: int
    bytes_offset: int
    bytes_size: int

    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> VulkanDelegateHeader:
        """The header in ``data`` (exactly the header's bytes, or fewer)."""
        data = bytes(data)
        if len(data) > VulkanDelegateHeader.EXPECTED_LENGTH:
            raise InvalidHeaderError(f"Expected header to be {VulkanDelegateHeader.EXPECTED_LENGTH}"
                                     f" bytes, but got {len(data)} bytes.")
        if len(data) < VulkanDelegateHeader.EXPECTED_LENGTH:
            raise InvalidHeaderError(f"Vulkan delegate blob is {len(data)} bytes, shorter than "
                                     f"its 30-byte header. {_HINT}")
        magic = data[VulkanDelegateHeader.MAGIC_IX]
        if magic != VulkanDelegateHeader.EXPECTED_MAGIC:
            raise InvalidHeaderError(f"Expected magic bytes to be "
                                     f"{VulkanDelegateHeader.EXPECTED_MAGIC!r}, but got {magic!r}.")
        length = int.from_bytes(data[VulkanDelegateHeader.HEADER_SIZE_IX], "little")
        if length != VulkanDelegateHeader.EXPECTED_LENGTH:
            raise InvalidHeaderError(f"Expected header to be {VulkanDelegateHeader.EXPECTED_LENGTH}"
                                     f" bytes, but got {length} bytes.")
        return VulkanDelegateHeader(
            *(int.from_bytes(data[ix], "little") for ix in (
                VulkanDelegateHeader.FLATBUFFER_OFFSET_IX, VulkanDelegateHeader.FLATBUFFER_SIZE_IX,
                VulkanDelegateHeader.BYTES_OFFSET_IX, VulkanDelegateHeader.BYTES_SIZE_IX)))

    def is_valid(self) -> bool:
        """A non-empty flatbuffer, raw bytes after it."""
        return (self.flatbuffer_size > 0 and self.bytes_size >= 0
                and self.bytes_offset >= self.flatbuffer_offset + self.flatbuffer_size)

    def to_bytes(self) -> bytes:
        if not self.is_valid():
            raise InvalidHeaderError(f"VulkanDelegateHeader instance contains invalid values: "
                                     f"{self}")
        try:
            return _LAYOUT.pack(b"\0\0\0\0", self.EXPECTED_MAGIC, self.EXPECTED_LENGTH,
                                self.flatbuffer_offset, self.flatbuffer_size, self.bytes_offset,
                                self.bytes_size)
        except struct.error as e:
            raise InvalidHeaderError(f"invalid Vulkan delegate header {self}: {e}") from None

    @classmethod
    def parse(cls, blob: bytes | bytearray | memoryview) -> VulkanDelegateHeader:
        """The header of a whole blob, checked as ExecuTorch's runtime checks it (header
        length at least 30, flatbuffer after the header and non-empty, raw bytes after it),
        and both regions inside the blob."""
        view = as_byte_view(blob, "Vulkan delegate blob")
        if len(view) < cls.EXPECTED_LENGTH:
            raise InvalidHeaderError(f"Vulkan delegate blob is {len(view)} bytes, shorter than "
                                     f"its {cls.EXPECTED_LENGTH}-byte header. {_HINT}")
        if bytes(view[cls.MAGIC_IX]) != cls.EXPECTED_MAGIC:
            raise InvalidHeaderError(f"Vulkan delegate blob has magic {bytes(view[cls.MAGIC_IX])!r}"
                                     f" where {cls.EXPECTED_MAGIC!r} belongs. {_HINT}")
        _, _, length, fb_off, fb_size, b_off, b_size = _LAYOUT.unpack_from(view, 0)
        header = cls(fb_off, fb_size, b_off, b_size)
        problem = None
        if length < cls.EXPECTED_LENGTH:
            problem = f"header length {length} < {cls.EXPECTED_LENGTH}"
        elif fb_off < length or fb_size == 0:
            problem = "the flatbuffer region is empty or overlaps the header"
        elif b_off < fb_off + fb_size:
            problem = "the raw bytes overlap the flatbuffer"
        elif fb_off + fb_size > len(view) or b_off + b_size > len(view):
            problem = f"a region ends past the blob's {len(view)} bytes"
        if problem:
            raise InvalidHeaderError(f"invalid Vulkan delegate header {header}: {problem}. "
                                     f"{_HINT}")
        return header


_LAYOUT = struct.Struct("<4s4sHIIIQ")  # zeros, magic, length, fb off/size, bytes off/size


def extract_vk_flatbuffer(data: bytes | bytearray | memoryview) -> bytes:
    h = VulkanDelegateHeader.from_bytes(bytes(data[:VulkanDelegateHeader.EXPECTED_LENGTH]))
    return bytes(data[h.flatbuffer_offset:h.flatbuffer_offset + h.flatbuffer_size])


@dataclass
class VulkanBlob:
    """A parsed blob: the header, the graph and a zero-copy view of the raw bytes."""

    header: VulkanDelegateHeader
    graph: vk.VkGraph
    raw_bytes: memoryview


def padding_required(data_len: int, alignment: int = ALIGNMENT) -> int:
    return -data_len % alignment


def aligned_size(data_len: int, alignment: int = ALIGNMENT) -> int:
    return aligned(data_len, alignment)


def pad_to(data: bytes, size: int) -> bytes:
    return data + b"\0" * (size - len(data)) if size > len(data) else data


def serialize_constant_tensors(vk_graph: vk.VkGraph, const_tensors: list,
                               raw_bytes: bytearray) -> None:
    """Fill ``vk_graph.constants``: ``(named key, size)`` entries refer to the named data;
    ``None`` or an empty tensor is empty; a tensor (anything NumPy can view) is appended to
    ``raw_bytes``, padded to 16."""
    assert not vk_graph.constants, "the graph already has constants"
    offset = len(raw_bytes)
    for t in const_tensors:
        if isinstance(t, tuple):
            key, size = t
            vk_graph.constants.append(vk.VkBytes(vk.NAMED_DATA_OFFSET, size, key))
            continue
        data = b"" if t is None else np.ascontiguousarray(np.asarray(t)).tobytes()
        if not data:
            vk_graph.constants.append(vk.VkBytes(offset, 0))
            continue
        raw_bytes += data + b"\0" * padding_required(len(data))
        vk_graph.constants.append(vk.VkBytes(offset, len(data)))
        offset += aligned_size(len(data))


def serialize_custom_shaders(vk_graph: vk.VkGraph, custom_shaders: list,
                             raw_bytes: bytearray) -> bytes:
    assert not vk_graph.shaders, "the graph already has shaders"
    if custom_shaders:
        raise NotImplementedError("Serializing Custom shaders are not yet supported")
    return b""


def serialize_vulkan_graph(vk_graph: vk.VkGraph, const_tensors: list = (),
                           custom_shaders: list = ()) -> bytes:
    """Header + flatbuffer + raw bytes (constants kept in the blob), each padded to 16."""
    raw = bytearray()
    serialize_constant_tensors(vk_graph, list(const_tensors), raw)
    serialize_custom_shaders(vk_graph, list(custom_shaders), raw)
    fb = convert_to_flatbuffer(vk_graph)
    header_len = aligned_size(VulkanDelegateHeader.EXPECTED_LENGTH)
    fb_len = aligned_size(len(fb))
    header = VulkanDelegateHeader(header_len, len(fb), header_len + fb_len, len(raw))
    return b"".join([pad_to(header.to_bytes(), header_len), pad_to(fb, fb_len),
                     pad_to(bytes(raw), aligned_size(len(raw)))])


def deserialize_vulkan_graph(blob: bytes | bytearray | memoryview) -> VulkanBlob:
    """Parse a Vulkan delegate blob; corruption raises ``FormatError``."""
    view = as_byte_view(blob, "Vulkan delegate blob")
    h = VulkanDelegateHeader.parse(view)
    graph = flatbuffer_to_vk_graph(view[h.flatbuffer_offset:h.flatbuffer_offset
                                        + h.flatbuffer_size])
    return VulkanBlob(h, graph, view[h.bytes_offset:h.bytes_offset + h.bytes_size])
