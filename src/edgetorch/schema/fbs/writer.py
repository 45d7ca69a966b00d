"""The writer of the flatbuffer engine: ``flatbuffers.Builder`` driven in a schema's order."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import flatbuffers

from ...errors import FormatError
from .types import FLATC, STRING, Bytes, Enum, F, Scalar, Struct, Union, as_byte_view

if TYPE_CHECKING:
    from . import Schema, TableDecl

# ---------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------


class TableWriter:
    __slots__ = ("schema", "b", "aligns")

    def __init__(self, schema: Schema, aligns: dict[str, int]) -> None:
        self.schema = schema
        self.b = flatbuffers.Builder(1024)
        self.aligns = aligns

    def table(self, obj: Any) -> int:
        return self.schema.writer(type(obj))(self, obj)


def raw_vector(
    builder: flatbuffers.Builder, raw: Any, elem_size: int, count: int, alignment: int
) -> int:
    """Write ``raw`` (``count`` little-endian elements) as one vector aligned to ``alignment``.

    Identical to the per-element ``Prepend`` loop of generated code: ``StartVector`` already
    aligns the end of the vector, so per-element ``Prep`` calls never add padding.
    """
    builder.StartVector(elem_size, count, alignment)
    nbytes = len(raw)
    if nbytes:
        builder.head = builder.Head() - nbytes
        builder.Bytes[builder.head : builder.head + nbytes] = raw
    return builder.EndVector()


def scalar_vector(
    builder: flatbuffers.Builder, code: str, elem_size: int, values: Sequence, name: str
) -> int:
    """Write a vector of scalars with ``struct`` code ``code`` (e.g. ``"i"`` for int32)."""
    count = len(values)
    try:
        raw = struct.pack(f"<{count}{code}", *values)
    except struct.error as e:
        raise FormatError(
            f"cannot serialize {name}: {e} (values {list(values)[:8]}...). "
            "Check the value ranges the schema allows for this field."
        ) from None
    return raw_vector(builder, raw, elem_size, count, elem_size)


def table_vector(builder: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    """Write a vector of offsets to already-built tables."""
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


def compile_writer(schema: Schema, cls: type, decl: TableDecl) -> Callable[[TableWriter, Any], int]:
    qual = cls.__name__ if cls is decl.cls else decl.cls.__name__
    children: list[tuple[str, int, Callable[[TableWriter, Any], Any]]] = []
    # (size, slot, adder(builder, obj, built)) in declaration order
    adds: list[tuple[int, int, Callable[..., None]]] = []
    for i, (f, slot) in enumerate(decl.fields):
        t = f.type
        if isinstance(t, (Scalar, Enum)):
            adds.append((_base(t).size, slot, _scalar_adder(f, slot)))
            continue
        if isinstance(t, Struct):  # written inline when added; flatc sorts it as 4 bytes
            adds.append((4, slot, _struct_adder(f.name, t, slot)))
            continue
        children.append((f.name, i, _child_builder(f, f"{qual}.{f.name}")))
        if isinstance(t, Union):
            adds.append((1, slot - 1, _tag_adder(i, slot - 1)))
        adds.append((4, slot, _offset_adder(i, slot)))
    if schema.order == FLATC:
        adds.sort(key=lambda a: (-a[0], -a[1]))
    adders = [a[2] for a in adds]
    nslots = 1 + max((slot for _, slot in decl.fields), default=-1)
    nfields = len(decl.fields)

    def write(w: TableWriter, obj: Any) -> int:
        built: list[Any] = [None] * nfields
        for name, i, build in children:
            value = getattr(obj, name)
            if value is not None:
                built[i] = build(w, value)
        b = w.b
        b.StartObject(nslots)
        for add in adders:
            add(b, obj, built)
        return b.EndObject()

    return write


def _base(t: Scalar | Enum) -> Scalar:
    return t.base if isinstance(t, Enum) else t


def _scalar_adder(f: F, slot: int) -> Callable[..., None]:
    base, name = _base(f.type), f.name
    convert = f.type.code if isinstance(f.type, Enum) else base.convert
    default = 0 if f.default is None else convert(f.default)
    method = getattr(flatbuffers.Builder, base.prepend)

    def add(b: flatbuffers.Builder, obj: Any, built: list) -> None:
        method(b, slot, convert(getattr(obj, name)), default)

    return add


def _struct_adder(name: str, t: Struct, slot: int) -> Callable[..., None]:
    def add(b: flatbuffers.Builder, obj: Any, built: list) -> None:
        value = getattr(obj, name)
        if value is None:
            return
        raw = t.pack(value)
        b.Prep(t.align, t.size)
        b.head = b.Head() - t.size
        b.Bytes[b.head : b.head + t.size] = raw
        b.PrependStructSlot(slot, b.Offset(), 0)

    return add


def _offset_adder(i: int, slot: int) -> Callable[..., None]:
    def add(b: flatbuffers.Builder, obj: Any, built: list) -> None:
        off = built[i]
        if off is not None:
            b.PrependUOffsetTRelativeSlot(slot, off[1] if isinstance(off, tuple) else off, 0)

    return add


def _tag_adder(i: int, slot: int) -> Callable[..., None]:
    def add(b: flatbuffers.Builder, obj: Any, built: list) -> None:
        if built[i] is not None:
            b.PrependUint8Slot(slot, built[i][0], 0)

    return add


def _child_builder(f: F, qual: str) -> Callable[[TableWriter, Any], Any]:
    t = f.type
    if t is STRING:
        return lambda w, v: w.b.CreateString(v)
    if isinstance(t, Bytes):
        default_align, key = t.align, t.key

        def build_bytes(w: TableWriter, v: Any) -> int:
            view = as_byte_view(v, qual)
            align = w.aligns.get(key, default_align) if key else default_align
            return raw_vector(w.b, view, 1, len(view), align)

        return build_bytes
    if isinstance(t, Union):
        members = t.members

        def build_union(w: TableWriter, v: Any) -> tuple[int, int]:
            try:
                tag = members.index(type(v)) + 1
            except ValueError:
                raise FormatError(
                    f"cannot serialize {qual}: {type(v).__name__} is not a member of the union "
                    f"({', '.join(m.__name__ for m in members)}). Fix the value."
                ) from None
            return tag, w.table(v)

        return build_union
    if isinstance(t, list):
        elem = t[0]
        if isinstance(elem, Scalar):
            code, size = elem.code, elem.size
            return lambda w, v: scalar_vector(w.b, code, size, v, qual)
        if isinstance(elem, Struct):
            return lambda w, v: raw_vector(
                w.b, b"".join(elem.pack(item) for item in v), elem.size, len(v), elem.align
            )
        unwrap = f.unwrap
        if unwrap is not None:
            return lambda w, v: table_vector(w.b, [w.table(elem(item)) for item in v])
        return lambda w, v: table_vector(w.b, [w.table(item) for item in v])
    if isinstance(t, type):
        return lambda w, v: w.table(v)
    raise TypeError(f"field {f.name}: unsupported type {t!r}")


