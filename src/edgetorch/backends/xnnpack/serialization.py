"""XNNPACK delegate blobs: the ``XH00`` header, the ``XNNGraph`` flatbuffer and constant data.

Blob layout (ExecuTorch 1.5.1, ``xnnpack_graph_serialize.py`` and ``runtime/XNNHeader.cpp``)::

    [0:4]    zeros (so the magic sits where a bare flatbuffer's identifier would)
    [4:8]    b"XH00"
    [8:10]   u16 header length (30)
    [10:14]  u32 flatbuffer offset     (30 rounded up to 16 = 32)
    [14:18]  u32 flatbuffer size
    [18:22]  u32 constant data offset  (flatbuffer offset + flatbuffer size rounded up to 16)
    [22:30]  u64 constant data size
    then zero padding, the flatbuffer (identifier "XN01"), zero padding, the constant data.

A blob without the magic is a bare flatbuffer with no constant data (old blobs). ExecuTorch 1.5
leaves the constant region empty: weights go to the program's named data and the graph refers
to them by key (``ConstantDataOffset.named_key``).

ExecuTorch builds the flatbuffer with ``flatc`` from JSON; ``XNNPACK_SCHEMA`` declares the
schema for the engine in ``edgetorch.schema.fbs`` with flatc's write order, which gives
ExecuTorch's bytes exactly, and its checked reader turns corruption into ``FormatError``.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass

from ...errors import FormatError
from ...schema.fbs import (
    FLATC,
    FLOAT,
    INT,
    SHORT,
    STRING,
    UINT,
    ULONG,
    Bytes,
    Enum,
    F,
    Schema,
    Union,
    aligned,
    as_byte_view,
)
from . import schema as x

_HINT = (
    "The delegate blob is truncated or corrupted, or was not written for the XNNPACK backend; "
    "re-export the model."
)

CONSTANT_TENSOR_ALIGNMENT = 16  # alignment of the flatbuffer and constant data in a blob


@dataclass
class _Buffer:
    """``table Buffer`` of the deprecated ``XNNGraph.constant_buffer`` (XN00 blobs)."""

    storage: bytes


def _uints(cls: type, **types) -> list[F]:
    """One field per dataclass field of ``cls``, in order; ``uint`` unless named in ``types``."""
    return [F(f.name, types.get(f.name, UINT)) for f in dataclasses.fields(cls)]


_DATATYPE = Enum(x.XNNDatatype, SHORT)

XNNPACK_SCHEMA = Schema(
    "XNNPACK schema.fbs",
    FLATC,  # ExecuTorch writes the graph with flatc from JSON
    {
        x.PerChannelGroupQuant: [
            F("scale", [FLOAT]),
            F("channel_dim", INT),
            F("group_size", INT),
            F("scale_buffer_idx", UINT, slot=4),  # slot 3: scale_bf16, deprecated
            F("num_scales", UINT),
        ],
        x.PerChannelQuant: _uints(x.PerChannelQuant, scale=[FLOAT], channel_dim=INT),
        x.PerTokenDynamicQuant: [F("num_nonbatch_dims", INT)],
        x.PerTensorQuant: [F("scale", FLOAT), F("zero_point", INT)],
        x.XNNTensorValue: _uints(
            x.XNNTensorValue, datatype=_DATATYPE, dims=[UINT], dq_datatype=_DATATYPE
        ),
        x.XNNQuantizedTensorValue: [
            F("tensor_value", x.XNNTensorValue, required=True),
            F("quant_params", Union(x.XNN_QUANT_PARAMS)),
        ],
        x.XValue: [F("xvalue_union", Union(x.XVALUE_UNION))],
        x.XNNNode1x1: _uints(x.XNNNode1x1),
        x.XNNNode2x1: _uints(x.XNNNode2x1),
        x.XNNCat: _uints(x.XNNCat),
        x.XNNNodeConv: _uints(x.XNNNodeConv),
        x.XNNPooling2D: _uints(x.XNNPooling2D),
        x.XNNStaticTranspose: _uints(x.XNNStaticTranspose, perm=[UINT]),
        x.XNNStaticResizeBilinear2D: _uints(x.XNNStaticResizeBilinear2D),
        x.XNNStaticConstantPad: _uints(
            x.XNNStaticConstantPad,
            pre_paddings=[UINT],
            post_paddings=[UINT],
            padding_value=FLOAT,
        ),
        x.XNNELU: _uints(x.XNNELU, alpha=FLOAT),
        x.XNNFullyConnected: _uints(x.XNNFullyConnected),
        x.XNNStaticReshape: _uints(x.XNNStaticReshape, new_shape=[UINT]),
        x.XNNStaticSlice: _uints(x.XNNStaticSlice, offsets=[UINT], sizes=[UINT]),
        x.XNNScaledDotProductAttention: _uints(x.XNNScaledDotProductAttention),
        x.XNNArgMaxPooling2d: _uints(x.XNNArgMaxPooling2d),
        x.XNNLeakyReLU: _uints(x.XNNLeakyReLU, negative_slope=FLOAT),
        x.OutputMinMax: [F("output_min", FLOAT), F("output_max", FLOAT)],
        x.XNode: [
            F("xnode_union", Union(x.XNODE_UNION)),
            F("debug_handle", UINT),
            F("output_min_max", x.OutputMinMax),
        ],
        x.ConstantDataOffset: [
            F("offset", ULONG),
            F("size", ULONG),
            F("named_key", STRING, optional=True),
        ],
        _Buffer: [F("storage", Bytes(16))],
        x.XNNGraph: [
            F("version", STRING),
            F("xnodes", [x.XNode]),
            F("xvalues", [x.XValue]),
            F("num_externs", UINT),
            F("input_ids", [UINT]),
            F("output_ids", [UINT]),
            F("constant_buffer", [_Buffer], optional=True, unwrap="storage"),  # deprecated
            F("mem_buffer_sizes", [UINT], optional=True),  # deprecated
            F("constant_data", [x.ConstantDataOffset]),
        ],
    },
)


def xnngraph_to_flatbuffer(graph: x.XNNGraph, *, identifier: bytes = x.FILE_IDENTIFIER) -> bytes:
    """Serialize ``graph`` to the flatbuffer bytes ExecuTorch's ``convert_to_flatbuffer`` makes."""
    return XNNPACK_SCHEMA.write(graph, identifier=identifier)


def xnngraph_from_flatbuffer(data: bytes | bytearray | memoryview) -> x.XNNGraph:
    """Parse an ``XNNGraph`` flatbuffer (identifier ``XN01`` or the older ``XN00``)."""
    return XNNPACK_SCHEMA.read(
        data,
        x.XNNGraph,
        identifiers=(x.FILE_IDENTIFIER, x.LEGACY_FILE_IDENTIFIER),
        what="XNNPACK graph flatbuffer",
        hint=_HINT,
    )


# ---- the blob: header + flatbuffer + constant data --------------------------------------


@dataclass(frozen=True)
class XNNHeader:
    """The 30-byte ``XH00`` header at the start of an XNNPACK delegate blob."""

    flatbuffer_offset: int
    flatbuffer_size: int
    constant_data_offset: int
    constant_data_size: int

    MAGIC = b"XH00"
    LENGTH = 30
    _LAYOUT = struct.Struct("<4s4sHIIIQ")  # zeros, magic, length, fb off/size, cd off, cd size

    def to_bytes(self) -> bytes:
        if not (self.flatbuffer_size > 0
                and self.constant_data_offset >= self.flatbuffer_offset + self.flatbuffer_size):
            raise FormatError(f"invalid XNNPACK header {self}: the flatbuffer must be non-empty "
                              "and the constant data must follow it")
        try:
            return self._LAYOUT.pack(b"\0\0\0\0", self.MAGIC, self.LENGTH, self.flatbuffer_offset,
                                     self.flatbuffer_size, self.constant_data_offset,
                                     self.constant_data_size)
        except struct.error as e:
            raise FormatError(f"invalid XNNPACK header {self}: {e}") from None

    @classmethod
    def parse(cls, blob: bytes | bytearray | memoryview) -> XNNHeader | None:
        """The header of ``blob``, or None when it has none (a bare flatbuffer).

        Checks what ExecuTorch's runtime checks: both regions lie inside the blob, the
        flatbuffer can hold its 8-byte prefix, and the constant data follows the flatbuffer.
        """
        view = as_byte_view(blob, "XNNPACK delegate blob")
        size = len(view)
        if size < 8:
            raise FormatError(f"XNNPACK delegate blob is {size} bytes, too small to hold a "
                              f"header or a flatbuffer. {_HINT}")
        if bytes(view[4:8]) != cls.MAGIC:
            return None
        if size < cls.LENGTH:
            raise FormatError(f"XNNPACK delegate blob is {size} bytes, shorter than its "
                              f"{cls.LENGTH}-byte XH00 header. {_HINT}")
        _, _, length, fb_off, fb_size, cd_off, cd_size = cls._LAYOUT.unpack_from(view, 0)
        if length < cls.LENGTH:
            raise FormatError(f"XNNPACK header length is {length}, expected {cls.LENGTH}. {_HINT}")
        if fb_off < length:
            raise FormatError(f"XNNPACK header: the flatbuffer at {fb_off} overlaps the "
                              f"{length}-byte header. {_HINT}")
        if fb_size < 8:
            raise FormatError(f"XNNPACK header: flatbuffer size {fb_size} is smaller than the "
                              f"8-byte flatbuffer prefix. {_HINT}")
        if fb_off > size or fb_size > size - fb_off:
            raise FormatError(f"XNNPACK header: flatbuffer [{fb_off}, {fb_off + fb_size}) lies "
                              f"outside the {size}-byte blob. {_HINT}")
        if cd_off > size or cd_size > size - cd_off:
            raise FormatError(f"XNNPACK header: constant data [{cd_off}, {cd_off + cd_size}) "
                              f"lies outside the {size}-byte blob. {_HINT}")
        if cd_off < fb_off + fb_size:
            raise FormatError(f"XNNPACK header: constant data at {cd_off} overlaps the flatbuffer "
                              f"[{fb_off}, {fb_off + fb_size}). {_HINT}")
        return cls(fb_off, fb_size, cd_off, cd_size)


@dataclass
class XnnpackBlob:
    """A parsed delegate blob. ``constant_data`` is a zero-copy slice of the blob."""

    graph: x.XNNGraph
    constant_data: memoryview
    header: XNNHeader | None


def deserialize_xnnpack_binary(blob: bytes | bytearray | memoryview) -> XnnpackBlob:
    """Parse a whole delegate blob (with or without the ``XH00`` header)."""
    view = as_byte_view(blob, "XNNPACK delegate blob")
    header = XNNHeader.parse(view)
    if header is None:
        return XnnpackBlob(xnngraph_from_flatbuffer(view), view[0:0], None)
    fb = view[header.flatbuffer_offset : header.flatbuffer_offset + header.flatbuffer_size]
    cd_end = header.constant_data_offset + header.constant_data_size
    return XnnpackBlob(
        xnngraph_from_flatbuffer(fb), view[header.constant_data_offset : cd_end], header
    )


def serialize_xnnpack_binary(
    graph: x.XNNGraph, constant_data: bytes | bytearray | memoryview = b""
) -> bytes:
    """The delegate blob ExecuTorch's ``serialize_xnnpack_binary`` writes for ``graph``."""
    fb = xnngraph_to_flatbuffer(graph)
    cd = as_byte_view(constant_data, "XNNPACK constant data")
    header_len = aligned(XNNHeader.LENGTH, CONSTANT_TENSOR_ALIGNMENT)
    fb_len = aligned(len(fb), CONSTANT_TENSOR_ALIGNMENT)
    header = XNNHeader(header_len, len(fb), header_len + fb_len, len(cd)).to_bytes()
    return b"".join([header.ljust(header_len, b"\0"), fb.ljust(fb_len, b"\0"), cd])
