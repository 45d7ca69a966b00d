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

ExecuTorch builds the flatbuffer with ``flatc`` from JSON. The writer reproduces flatc's order:
a table's strings, vectors, sub-tables and union values are built first, in field order; then
its fields are added largest first (8, 4, 2, 1 bytes) and, within a size, from the last field
id to the first; scalars equal to their default (all 0 here) are omitted. With flatbuffers'
Builder this gives ExecuTorch's bytes exactly. Reading goes through the bounds-checked
primitives of ``edgetorch.schema._fbreader``, so corruption raises ``FormatError``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import flatbuffers

from ...errors import FormatError
from ...schema._fbreader import U32, U64, FbReader, Table
from ...schema._fbwriter import aligned, as_byte_view, raw_vector, scalar_vector, table_vector
from . import schema as x

_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_F32 = struct.Struct("<f")
_HINT = (
    "The delegate blob is truncated or corrupted, or was not written for the XNNPACK backend; "
    "re-export the model."
)

CONSTANT_TENSOR_ALIGNMENT = 16  # alignment of the flatbuffer and constant data in a blob

# ---- table specs ------------------------------------------------------------------------
# (field name, vtable slot, kind, extra); kinds with their inline sizes:
_SIZE = {"u8": 1, "i16": 2, "u32": 4, "i32": 4, "f32": 4, "u64": 8}
# offset kinds (4 bytes inline): str, vu32, vf32, bytes16, table, tables, union (slot = value
# slot; its type byte is in slot - 1).


@dataclass(frozen=True)
class _F:
    name: str
    slot: int
    kind: str
    ref: Any = None


def _u32s(cls: type, first_slot: int = 0, **kinds: str) -> tuple[_F, ...]:
    """Consecutive slots for the dataclass fields of ``cls``; uint32 unless named in kinds."""
    from dataclasses import fields

    return tuple(
        _F(f.name, first_slot + i, kinds.get(f.name, "u32")) for i, f in enumerate(fields(cls))
    )


SPECS: dict[type, tuple[_F, ...]] = {
    x.PerChannelGroupQuant: (
        _F("scale", 0, "vf32"),
        _F("channel_dim", 1, "i32"),
        _F("group_size", 2, "i32"),
        # slot 3: scale_bf16, deprecated
        _F("scale_buffer_idx", 4, "u32"),
        _F("num_scales", 5, "u32"),
    ),
    x.PerChannelQuant: _u32s(x.PerChannelQuant, scale="vf32", channel_dim="i32"),
    x.PerTokenDynamicQuant: (_F("num_nonbatch_dims", 0, "i32"),),
    x.PerTensorQuant: (_F("scale", 0, "f32"), _F("zero_point", 1, "i32")),
    x.XNNTensorValue: _u32s(x.XNNTensorValue, datatype="i16", dims="vu32", dq_datatype="i16"),
    x.XNNQuantizedTensorValue: (
        _F("tensor_value", 0, "table", x.XNNTensorValue),
        _F("quant_params", 2, "union", x.XNN_QUANT_PARAMS),
    ),
    x.XValue: (_F("xvalue_union", 1, "union", x.XVALUE_UNION),),
    x.XNNNode1x1: _u32s(x.XNNNode1x1),
    x.XNNNode2x1: _u32s(x.XNNNode2x1),
    x.XNNCat: _u32s(x.XNNCat),
    x.XNNNodeConv: _u32s(x.XNNNodeConv),
    x.XNNPooling2D: _u32s(x.XNNPooling2D),
    x.XNNStaticTranspose: _u32s(x.XNNStaticTranspose, perm="vu32"),
    x.XNNStaticResizeBilinear2D: _u32s(x.XNNStaticResizeBilinear2D),
    x.XNNStaticConstantPad: _u32s(
        x.XNNStaticConstantPad, pre_paddings="vu32", post_paddings="vu32", padding_value="f32"
    ),
    x.XNNELU: _u32s(x.XNNELU, alpha="f32"),
    x.XNNFullyConnected: _u32s(x.XNNFullyConnected),
    x.XNNStaticReshape: _u32s(x.XNNStaticReshape, new_shape="vu32"),
    x.XNNStaticSlice: _u32s(x.XNNStaticSlice, offsets="vu32", sizes="vu32"),
    x.XNNScaledDotProductAttention: _u32s(x.XNNScaledDotProductAttention),
    x.XNNArgMaxPooling2d: _u32s(x.XNNArgMaxPooling2d),
    x.XNNLeakyReLU: _u32s(x.XNNLeakyReLU, negative_slope="f32"),
    x.OutputMinMax: (_F("output_min", 0, "f32"), _F("output_max", 1, "f32")),
    x.XNode: (
        _F("xnode_union", 1, "union", x.XNODE_UNION),
        _F("debug_handle", 2, "u32"),
        _F("output_min_max", 3, "table", x.OutputMinMax),
    ),
    x.ConstantDataOffset: (
        _F("offset", 0, "u64"),
        _F("size", 1, "u64"),
        _F("named_key", 2, "str"),
    ),
    x.XNNGraph: (
        _F("version", 0, "str"),
        _F("xnodes", 1, "tables", x.XNode),
        _F("xvalues", 2, "tables", x.XValue),
        _F("num_externs", 3, "u32"),
        _F("input_ids", 4, "vu32"),
        _F("output_ids", 5, "vu32"),
        _F("constant_buffer", 6, "tables", "Buffer"),  # deprecated: [ubyte] storage, align 16
        _F("mem_buffer_sizes", 7, "vu32"),  # deprecated
        _F("constant_data", 8, "tables", x.ConstantDataOffset),
    ),
}
# Fields that stay None when absent (everything else reads as its empty value).
_OPTIONAL = {(x.XNNGraph, "constant_buffer"), (x.XNNGraph, "mem_buffer_sizes"),
             (x.ConstantDataOffset, "named_key"), (x.XNode, "output_min_max")}


def _spec(cls: type) -> tuple[_F, ...]:
    for base in cls.__mro__:  # union members share their base table's layout
        spec = SPECS.get(base)
        if spec is not None:
            return spec
    raise FormatError(f"XNNPACK schema has no table for {cls.__name__}")


# ---- writing ----------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)

    def table(self, obj: Any) -> int:
        b = self.b
        spec = _spec(type(obj))
        built: dict[int, int] = {}
        tags: dict[int, int] = {}
        for f in spec:  # children first, in field order (flatc builds them while parsing)
            v = getattr(obj, f.name)
            if v is None or f.kind in _SIZE:
                continue
            if f.kind == "union":
                members = f.ref
                if type(v) not in members:
                    raise FormatError(
                        f"cannot serialize {type(obj).__name__}.{f.name}: {type(v).__name__} "
                        f"is not a member of the union "
                        f"({', '.join(m.__name__ for m in members)})")
                tags[f.slot - 1] = members.index(type(v)) + 1
            built[f.slot] = self.child(f, v)
        b.StartObject(max(f.slot for f in spec) + 1)
        adds: list[tuple[int, int, Callable[[], None]]] = []
        for f in spec:
            v = getattr(obj, f.name)
            if f.kind in _SIZE:
                adds.append((f.slot, _SIZE[f.kind], _scalar_adder(b, f, v)))
            elif f.slot in built:
                adds.append((f.slot, 4, _offset_adder(b, f.slot, built[f.slot])))
                if f.kind == "union":
                    tag_slot = f.slot - 1
                    adds.append((tag_slot, 1, _tag_adder(b, tag_slot, tags[tag_slot])))
        for size in (8, 4, 2, 1):
            for _, _, add in sorted((a for a in adds if a[1] == size), key=lambda a: -a[0]):
                add()
        return b.EndObject()

    def child(self, f: _F, v: Any) -> int:
        b = self.b
        name = f.name
        if f.kind == "str":
            return b.CreateString(v)
        if f.kind == "vu32":
            return scalar_vector(b, "I", 4, v, name)
        if f.kind == "vf32":
            return scalar_vector(b, "f", 4, v, name)
        if f.kind in ("table", "union"):
            return self.table(v)
        if f.kind == "tables":
            if f.ref == "Buffer":
                return table_vector(b, [self.buffer(d) for d in v])
            return table_vector(b, [self.table(item) for item in v])
        raise AssertionError(f.kind)

    def buffer(self, data: bytes) -> int:
        view = as_byte_view(data, "XNNGraph.constant_buffer entry")
        storage = raw_vector(self.b, view, 1, len(view), 16)
        self.b.StartObject(1)
        self.b.PrependUOffsetTRelativeSlot(0, storage, 0)
        return self.b.EndObject()


def _scalar_adder(b: flatbuffers.Builder, f: _F, v: Any) -> Callable[[], None]:
    prepend = {
        "u8": b.PrependUint8Slot,
        "i16": b.PrependInt16Slot,
        "u32": b.PrependUint32Slot,
        "i32": b.PrependInt32Slot,
        "f32": b.PrependFloat32Slot,
        "u64": b.PrependUint64Slot,
    }[f.kind]
    value = float(v) if f.kind == "f32" else int(v)
    return lambda: prepend(f.slot, value, 0)


def _offset_adder(b: flatbuffers.Builder, slot: int, off: int) -> Callable[[], None]:
    return lambda: b.PrependUOffsetTRelativeSlot(slot, off, 0)


def _tag_adder(b: flatbuffers.Builder, slot: int, tag: int) -> Callable[[], None]:
    return lambda: b.PrependUint8Slot(slot, tag, 0)


def xnngraph_to_flatbuffer(graph: x.XNNGraph, *, identifier: bytes = x.FILE_IDENTIFIER) -> bytes:
    """Serialize ``graph`` to the flatbuffer bytes ExecuTorch's ``convert_to_flatbuffer`` makes."""
    w = _Writer()
    try:
        root = w.table(graph)
    except (TypeError, ValueError, AttributeError, struct.error) as e:
        raise FormatError(
            f"cannot serialize the XNNGraph: {e}. Check that every field holds a value of its "
            "schema type (ids are uint32, lists where lists are expected)."
        ) from e
    w.b.Finish(root, file_identifier=identifier)
    return bytes(w.b.Output())


# ---- reading ----------------------------------------------------------------------------


def _read_table(t: Table, cls: type) -> Any:
    kwargs: dict[str, Any] = {}
    for f in _spec(cls):
        name, slot, kind = f.name, f.slot, f.kind
        if kind == "u32":
            v: Any = t.scalar(slot, U32, 0, name)
        elif kind == "i32":
            v = t.scalar(slot, _I32, 0, name)
        elif kind == "u64":
            v = t.scalar(slot, U64, 0, name)
        elif kind == "f32":
            v = t.scalar(slot, _F32, 0.0, name)
        elif kind == "i16":
            raw = t.scalar(slot, _I16, 0, name)
            try:
                v = x.XNNDatatype(raw)
            except ValueError:
                t.fail(name, f"{raw} is not a valid XNNDatatype")
        elif kind == "str":
            v = t.string(slot, name)
            if v is None and (cls, name) not in _OPTIONAL:
                v = ""
        elif kind == "vu32":
            v = t.scalars(slot, "I", 4, name)
        elif kind == "vf32":
            v = t.scalars(slot, "f", 4, name)
        elif kind == "table":
            sub = t.table(slot, name)
            v = None if sub is None else _read_table(sub, f.ref)
        elif kind == "tables":
            subs = t.tables(slot, name)
            if subs is None:
                v = None
            elif f.ref == "Buffer":
                v = [_read_buffer(s) for s in subs]
            else:
                v = [_read_table(s, f.ref) for s in subs]
        elif kind == "union":
            member, sub = t.union(slot - 1, slot, f.ref, name)
            v = _read_table(sub, member)
        else:  # pragma: no cover - the specs above use only these kinds
            raise AssertionError(kind)
        if v is None and kind in ("vu32", "vf32", "tables") and (cls, name) not in _OPTIONAL:
            v = []
        if v is None and kind == "table" and (cls, name) not in _OPTIONAL:
            t.fail(name, "required table is missing")
        kwargs[name] = v
    return cls(**kwargs)


def _read_buffer(t: Table) -> memoryview:
    data = t.ubytes(0, "storage")
    return data if data is not None else memoryview(b"")


def xnngraph_from_flatbuffer(data: bytes | bytearray | memoryview) -> x.XNNGraph:
    """Parse an ``XNNGraph`` flatbuffer (identifier ``XN01`` or the older ``XN00``)."""
    r = FbReader(data, what="XNNPACK graph flatbuffer", hint=_HINT)
    ident = r.identifier()
    if ident not in (x.FILE_IDENTIFIER, x.LEGACY_FILE_IDENTIFIER):
        raise FormatError(
            f"XNNPACK graph flatbuffer has identifier {ident!r}, expected {x.FILE_IDENTIFIER!r} "
            f"or {x.LEGACY_FILE_IDENTIFIER!r}. {_HINT}"
        )
    return _read_table(r.root("XNNGraph"), x.XNNGraph)


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
