"""One declarative FlatBuffers engine: a schema is data; its writer and reader follow from it.

A schema maps each dataclass to the list of its table's fields (``F``): name, type, vtable slot
(consecutive unless given), default, and what an absent field reads as. From that the engine
makes

* a writer that drives ``flatbuffers.Builder`` in one of the two orders ExecuTorch's files are
  written in, so that our bytes equal theirs, not merely decode alike:

  - ``OBJECT_API`` (flatc's generated Python ``Pack`` methods, used for ``program.fbs`` and
    ``.bpte``): a table's strings, vectors and sub-tables are built first, in field order, then
    its fields are added in field order;
  - ``FLATC`` (the ``flatc`` compiler reading JSON, used for ``.ptd``, XNNPACK blobs and the
    Python ETDump serializer): children first in field order, then the fields largest first
    (8, 4, 2, 1 bytes) and, within a size, from the last field to the first.

  In both, a scalar equal to its schema default is omitted, as Builder and flatc do.
* a reader for untrusted bytes that never uses flatbuffers' accessors: every offset, vtable,
  length and string is checked against the real buffer first, and any problem raises the
  caller's ``FormatError`` subclass naming the path (``Program.execution_plan[0].values``), the
  table's byte offset and what is wrong. A vector's claimed length must fit in the bytes that
  follow it (no allocation or loop is driven by a forged length), and total decoding work is
  bounded by a budget proportional to the buffer size (offsets aimed many times at one large
  object run out of budget instead of amplifying work). Schemas are not recursive, so depth is
  bounded by the schema, not by the data.

Readers and writers are closures compiled once per class from the declarations, so reading
costs about what a hand-written reader does.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NoReturn

import flatbuffers

from ..errors import FormatError

OBJECT_API = "object_api"
FLATC = "flatc"

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16X2 = struct.Struct("<HH")
_BUDGET_FACTOR = 4  # a well-formed buffer decodes at most its own size; allow slack
_BUDGET_SLACK = 1 << 16


# ---------------------------------------------------------------------------------------
# Field types
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    """A FlatBuffers scalar type: its ``struct`` code, size and Builder slot method."""

    name: str
    code: str
    size: int
    prepend: str
    convert: Callable[[Any], Any] = int

    @property
    def st(self) -> struct.Struct:
        return struct.Struct("<" + self.code)


BOOL = Scalar("bool", "?", 1, "PrependBoolSlot", bool)
BYTE = Scalar("byte", "b", 1, "PrependInt8Slot")
UBYTE = Scalar("ubyte", "B", 1, "PrependUint8Slot")
SHORT = Scalar("short", "h", 2, "PrependInt16Slot")
USHORT = Scalar("ushort", "H", 2, "PrependUint16Slot")
INT = Scalar("int", "i", 4, "PrependInt32Slot")
UINT = Scalar("uint", "I", 4, "PrependUint32Slot")
LONG = Scalar("long", "q", 8, "PrependInt64Slot")
ULONG = Scalar("ulong", "Q", 8, "PrependUint64Slot")
FLOAT = Scalar("float", "f", 4, "PrependFloat32Slot", float)
DOUBLE = Scalar("double", "d", 8, "PrependFloat64Slot", float)


@dataclass(frozen=True)
class Enum:
    """An enum field: values of ``cls`` stored as ``base``; unknown values are a FormatError."""

    cls: type[IntEnum]
    base: Scalar = BYTE


class String:
    """A ``string`` field (UTF-8, NUL-terminated)."""


STRING = String()


@dataclass(frozen=True)
class Bytes:
    """A ``[ubyte]`` field read as a zero-copy memoryview (``copy=True``: as ``bytes``).

    ``align`` is the schema's ``force_align``; a writer may override it under ``key``
    (ExecuTorch patches ``Buffer.storage``'s alignment from its config).
    """

    align: int = 1
    key: str = ""
    copy: bool = False


@dataclass(frozen=True)
class Union:
    """A union field: it takes two slots, the type tag (ubyte) and then the value offset.

    ``members`` are the member classes in schema order (tag = index + 1; 0 is NONE).
    """

    members: tuple[type, ...]


class Struct:
    """A struct: fixed-size scalars stored inline, each at its natural alignment, the whole
    padded to its largest member (flatbuffers' layout). ``fields`` name ``cls``'s fields in
    order. A table field or vector may hold one (``F("box", BOX)``, ``F("boxes", [BOX])``).
    """

    def __init__(self, cls: type, fields: list[tuple[str, Scalar]]) -> None:
        fmt, offset, align = "<", 0, 1
        for _, t in fields:
            pad = -offset % t.size
            fmt += "x" * pad + t.code
            offset += pad + t.size
            align = max(align, t.size)
        self.cls = cls
        self.names = [name for name, _ in fields]
        self.types = [t for _, t in fields]
        self.st = struct.Struct(fmt + "x" * (-offset % align))
        self.size = self.st.size
        self.align = align
        init = [f.name for f in dataclasses.fields(cls) if f.init]
        if self.names != init:
            raise TypeError(f"{cls.__name__}: declared fields {self.names} != dataclass {init}")

    def pack(self, value: Any) -> bytes:
        return self.st.pack(*[t.convert(getattr(value, n)) for n, t in zip(self.names, self.types)])


@dataclass(frozen=True)
class F:
    """One declared field.

    ``type``: a ``Scalar``, ``Enum``, ``STRING``, ``Bytes``, ``Union``, ``Struct``, a dataclass
    (table), or a one-element list ``[Scalar]`` / ``[Struct]`` / ``[dataclass]`` for vectors. Absent fields read as
    ``default`` for scalars; ``None`` when ``optional``; otherwise the empty value (``""``,
    ``[]``, empty bytes), and for tables ``default()`` when a factory is given, else ``None``
    (or a FormatError when ``required``). ``unwrap`` presents a vector of one-field tables as a
    list of that field's values. ``slot`` defaults to the next free one.
    """

    name: str
    type: Any
    default: Any = None
    optional: bool = False
    required: bool = False
    slot: int | None = None
    unwrap: str | None = None


# ---------------------------------------------------------------------------------------
# Error paths: (parent, label) tuples, rendered only when something fails
# ---------------------------------------------------------------------------------------


def _render(where: Any) -> str:
    parts: list[str] = []
    while isinstance(where, tuple):
        where, label = where[0], where[1]
        parts.append(f"[{label}]" if isinstance(label, int) else f".{label}")
    return str(where) + "".join(reversed(parts))


class _Reader:
    """One buffer being read: the bytes, the error class, the budget and a vtable cache."""

    __slots__ = ("buf", "size", "what", "hint", "error", "budget", "vtables")

    def __init__(self, data: Any, what: str, hint: str, error: type[FormatError]) -> None:
        buf = memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        self.buf = buf
        self.size = len(buf)
        self.what = what
        self.hint = hint
        self.error = error
        self.budget = _BUDGET_FACTOR * self.size + _BUDGET_SLACK
        self.vtables: dict[int, tuple[int, tuple[int, ...]]] = {}

    def fail(self, where: Any, message: str) -> NoReturn:
        raise self.error(f"{self.what} is malformed: {_render(where)}: {message}. {self.hint}")

    def field_fail(self, where: Any, name: str, pos: int, message: str) -> NoReturn:
        self.fail((where, name), f"(table at {pos:#x}) {message}")

    def charge(self, nbytes: int, where: Any) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            self.fail(
                where,
                f"decoding would touch more than {_BUDGET_FACTOR}x the {self.size}-byte buffer "
                "(many offsets point at the same large object)",
            )

    def vtable(self, pos: int, where: Any) -> tuple[int, ...]:
        """Field offsets of the table at ``pos``, with the table and its vtable checked."""
        size = self.size
        if pos < 0 or pos + 4 > size:
            self.fail(where, f"table at offset {pos:#x} lies outside the {size}-byte buffer")
        vpos = pos - _I32.unpack_from(self.buf, pos)[0]
        vt = self.vtables.get(vpos)
        if vt is None:
            if vpos < 0 or vpos + 4 > size:
                self.fail(where, f"vtable of table at {pos:#x} is at {vpos:#x}, outside the buffer")
            vsize, osize = _U16X2.unpack_from(self.buf, vpos)
            if vsize < 4 or vsize % 2 or vpos + vsize > size:
                self.fail(where, f"vtable at {vpos:#x} has invalid size {vsize}")
            vt = (osize, struct.unpack_from(f"<{(vsize - 4) // 2}H", self.buf, vpos + 4))
            self.vtables[vpos] = vt
        osize, fields = vt
        if osize < 4 or pos + osize > size:
            self.fail(where, f"table at {pos:#x} claims {osize} bytes, past the end of the buffer")
        self.budget -= osize
        if self.budget < 0:
            self.charge(0, where)
        return fields

    def field(self, pos: int, vt: tuple[int, ...], slot: int, width: int, where: Any,
              name: str) -> int:
        """Absolute position of a present field, or 0 when absent.

        Bounded by the buffer, not by the table's object size, as flatbuffers' own verifier
        does (ExecuTorch writes Double EValues whose 8-byte field ends past it).
        """
        if slot >= len(vt):
            return 0
        off = vt[slot]
        if not off:
            return 0
        if off < 4 or pos + off + width > self.size:
            self.field_fail(where, name, pos, f"field offset {off} runs past the end of the buffer")
        return pos + off

    def deref(self, pos: int, vt: tuple[int, ...], slot: int, where: Any, name: str) -> int:
        """Target of an offset field, or -1 when absent; the target's first 4 bytes exist."""
        p = self.field(pos, vt, slot, 4, where, name)
        if not p:
            return -1
        target = p + _U32.unpack_from(self.buf, p)[0]
        if target + 4 > self.size:
            self.field_fail(
                where, name, pos,
                f"offset at {p:#x} points to {target:#x}, past the end of the "
                f"{self.size}-byte buffer",
            )
        return target

    def vector(self, target: int, esize: int, where: Any, name: str) -> tuple[int, int]:
        """(start, length) of the vector at ``target``, whose bytes must all be in the buffer."""
        length = _U32.unpack_from(self.buf, target)[0]
        start = target + 4
        nbytes = length * esize
        if nbytes > self.size - start:
            self.fail(
                (where, name),
                f"vector at {target:#x} claims {length} elements of {esize} bytes, "
                f"past the end of the {self.size}-byte buffer",
            )
        self.charge(nbytes, (where, name))
        return start, length


# ---------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------

_Read = Callable[[_Reader, int, Any], Any]
_Write = Callable[["_Writer", Any], int]


@dataclass
class _Slots:
    """A declared table with slots resolved."""

    cls: type
    fields: list[tuple[F, int]]  # (field, slot); for unions the slot of the value


class Schema:
    """A flatbuffer schema declared as data: ``{dataclass: [F, ...]}`` plus the write order.

    Union members may be subclasses of a declared class (the XNNPACK schema's node aliases):
    they share its fields and read back as the subclass.
    """

    def __init__(self, name: str, order: str, tables: dict[type, list[F]]) -> None:
        if order not in (OBJECT_API, FLATC):
            raise ValueError(f"unknown write order {order!r}")
        self.name = name
        self.order = order
        self.tables: dict[type, _Slots] = {cls: _resolve(cls, fs) for cls, fs in tables.items()}
        self._readers: dict[type, _Read] = {}
        self._writers: dict[type, _Write] = {}

    def _decl(self, cls: type) -> _Slots:
        for base in cls.__mro__:
            decl = self.tables.get(base)
            if decl is not None:
                return decl
        raise FormatError(f"{self.name} declares no table for {cls.__name__}")

    # --- writing -----------------------------------------------------------------------

    def write(
        self,
        obj: Any,
        *,
        identifier: bytes,
        size_prefixed: bool = False,
        aligns: dict[str, int] | None = None,
    ) -> bytes:
        """Serialize ``obj`` (a declared root table) to flatbuffer bytes.

        ``aligns`` overrides the ``force_align`` of ``Bytes`` fields by their key. Values that
        do not fit their schema type raise ``FormatError`` naming the field.
        """
        w = _Writer(self, aligns or {})
        try:
            root = w.table(obj)
        except (TypeError, ValueError, AttributeError, struct.error) as e:
            # flatbuffers' enforce_number raises TypeError for out-of-range scalars.
            raise FormatError(
                f"cannot serialize the {type(obj).__name__} ({self.name}): {e}. Check that every "
                "field holds a value of its schema type (ints in range, enums valid, lists where "
                "lists are expected)."
            ) from e
        if size_prefixed:
            w.b.FinishSizePrefixed(root, file_identifier=identifier)
        else:
            w.b.Finish(root, file_identifier=identifier)
        return bytes(w.b.Output())

    def writer(self, cls: type) -> _Write:
        fn = self._writers.get(cls)
        if fn is None:
            fn = self._writers[cls] = _compile_writer(self, cls, self._decl(cls))
        return fn

    # --- reading -----------------------------------------------------------------------

    def read(
        self,
        data: Any,
        root: type,
        *,
        identifiers: Sequence[bytes],
        what: str,
        hint: str,
        error: type[FormatError] = FormatError,
        size_prefixed: bool = False,
    ) -> Any:
        """Parse ``data`` into ``root`` dataclasses; every problem raises ``error``.

        ``identifiers`` are the accepted file identifiers (empty: not checked). With
        ``size_prefixed`` the buffer starts with a u32 size that must fit in ``data``.
        """
        r = _Reader(data, what, hint, error)
        if size_prefixed:
            if r.size < 4:
                r.fail(root.__name__, f"buffer is {r.size} bytes, too small for a size prefix")
            (claimed,) = _U32.unpack_from(r.buf, 0)
            if claimed > r.size - 4:
                r.fail(root.__name__, f"size prefix says {claimed} bytes follow, but only "
                                      f"{r.size - 4} do")
            r = _Reader(r.buf[4 : 4 + claimed], what, hint, error)
        if r.size < 8:
            r.fail(root.__name__, f"buffer is {r.size} bytes, smaller than the 8-byte "
                                  "flatbuffer prefix")
        ident = bytes(r.buf[4:8])
        if identifiers and ident not in identifiers:
            expected = " or ".join(repr(i) for i in identifiers)
            r.fail("file identifier", f"has identifier {ident!r}, expected {expected}")
        (offset,) = _U32.unpack_from(r.buf, 0)
        if offset < 8:
            r.fail(root.__name__, f"root table offset {offset:#x} points into the 8-byte prefix")
        return self.reader(root)(r, offset, root.__name__)

    def reader(self, cls: type) -> _Read:
        fn = self._readers.get(cls)
        if fn is None:
            fn = self._readers[cls] = _compile_reader(self, cls, self._decl(cls))
        return fn


def _resolve(cls: type, fields: list[F]) -> _Slots:
    init = [f.name for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in fields]
    if names != init:
        raise TypeError(f"{cls.__name__}: declared fields {names} != dataclass fields {init}")
    out, nxt = [], 0
    for f in fields:
        slot = nxt if f.slot is None else f.slot
        if isinstance(f.type, Union):
            slot += 1  # the tag takes the first of the two slots
        out.append((f, slot))
        nxt = slot + 1
    return _Slots(cls, out)


# ---------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------


def _compile_reader(schema: Schema, cls: type, decl: _Slots) -> _Read:
    readers = [_field_reader(schema, f, slot) for f, slot in decl.fields]

    def read(r: _Reader, pos: int, where: Any) -> Any:
        vt = r.vtable(pos, where)
        return cls(*[rd(r, pos, vt, where) for rd in readers])

    return read


def _field_reader(schema: Schema, f: F, slot: int) -> Callable[..., Any]:
    name, t = f.name, f.type
    if isinstance(t, (Scalar, Enum)):
        return _scalar_reader(f, slot)
    if isinstance(t, Union):
        return _union_reader(schema, f, slot)
    if isinstance(t, Struct):
        unpack, size, cls, factory = t.st.unpack_from, t.size, t.cls, f.default

        def read_struct(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
            p = r.field(pos, vt, slot, size, where, name)
            if p:
                return cls(*unpack(r.buf, p))
            return _absent(r, pos, where, f, None if factory is None else factory())

        return read_struct
    absent: Any = None if f.optional else ""
    if t is STRING:
        def read_string(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target < 0:
                return _absent(r, pos, where, f, absent)
            start, length = r.vector(target, 1, where, name)
            buf = r.buf
            if start + length >= r.size or buf[start + length] != 0:
                r.fail((where, name), f"string at {target:#x} is not NUL-terminated")
            try:
                return str(buf[start : start + length], "utf-8")
            except UnicodeDecodeError as e:
                r.fail((where, name), f"string at {target:#x} is not valid UTF-8 ({e.reason})")

        return read_string
    if isinstance(t, Bytes):
        copy = t.copy
        empty: Any = None if f.optional else (b"" if copy else memoryview(b""))

        def read_bytes(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target < 0:
                return _absent(r, pos, where, f, empty)
            start, length = r.vector(target, 1, where, name)
            view = r.buf[start : start + length]
            return bytes(view) if copy else view

        return read_bytes
    if isinstance(t, list):
        return _vector_reader(schema, f, slot, t[0])
    if isinstance(t, type):  # a table
        sub = _lazy(schema.reader, t)
        required, factory = f.required, f.default

        def read_table(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target >= 0:
                return sub()(r, target, (where, name))
            if required:
                _absent(r, pos, where, f, None)
            return None if factory is None else factory()

        return read_table
    raise TypeError(f"field {name}: unsupported type {t!r}")


def _scalar_reader(f: F, slot: int) -> Callable[..., Any]:
    name = f.name
    if isinstance(f.type, Enum):
        base, enum_cls = f.type.base, f.type.cls
        members = {int(m): m for m in enum_cls}
        default = enum_cls(0) if f.default is None else f.default
    else:
        base, members = f.type, None
        default = base.convert(0) if f.default is None else f.default
    unpack, size = base.st.unpack_from, base.size

    def read_scalar(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
        off = vt[slot] if slot < len(vt) else 0
        if off:
            if off < 4 or pos + off + size > r.size:
                r.field(pos, vt, slot, size, where, name)  # raises, naming the field
            value = unpack(r.buf, pos + off)[0]
            if members is None:
                return value
            member = members.get(value)
            if member is None:
                r.field_fail(where, name, pos, f"{value} is not a valid {enum_cls.__name__}")
            return member
        return default

    return read_scalar


def _vector_reader(schema: Schema, f: F, slot: int, elem: Any) -> Callable[..., Any]:
    name = f.name
    optional = f.optional
    if isinstance(elem, Scalar):
        code, esize = elem.code, elem.size

        def read_scalars(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target < 0:
                return _absent(r, pos, where, f, None if optional else [])
            start, length = r.vector(target, esize, where, name)
            return list(struct.unpack_from(f"<{length}{code}", r.buf, start))

        return read_scalars
    if isinstance(elem, Struct):
        st, ssize, scls = elem.st, elem.size, elem.cls

        def read_structs(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target < 0:
                return _absent(r, pos, where, f, None if optional else [])
            start, length = r.vector(target, ssize, where, name)
            return [scls(*v) for v in st.iter_unpack(r.buf[start : start + length * ssize])]

        return read_structs
    sub = _lazy(schema.reader, elem)
    unwrap = f.unwrap

    def read_tables(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
        target = r.deref(pos, vt, slot, where, name)
        if target < 0:
            return _absent(r, pos, where, f, None if optional else [])
        start, length = r.vector(target, 4, where, name)
        offsets = struct.unpack_from(f"<{length}I", r.buf, start)
        read, parent = sub(), (where, name)
        items = [read(r, start + 4 * i + off, (parent, i)) for i, off in enumerate(offsets)]
        return items if unwrap is None else [getattr(item, unwrap) for item in items]

    return read_tables


def _union_reader(schema: Schema, f: F, slot: int) -> Callable[..., Any]:
    name, members = f.name, f.type.members
    tag_slot = slot - 1

    def read_union(r: _Reader, pos: int, vt: tuple, where: Any) -> Any:
        p = r.field(pos, vt, tag_slot, 1, where, name + "_type")
        tag = r.buf[p] if p else 0
        if tag == 0:
            r.field_fail(where, name, pos, "union has no value (type NONE)")
        if tag > len(members):
            r.field_fail(where, name, pos,
                         f"union type tag {tag} is not one of the {len(members)} members")
        member = members[tag - 1]
        target = r.deref(pos, vt, slot, where, name)
        if target < 0:
            r.field_fail(where, name, pos,
                         f"union type is {member.__name__} but the value is missing")
        return schema.reader(member)(r, target, (where, f"{name}<{member.__name__}>"))

    return read_union


def _absent(r: _Reader, pos: int, where: Any, f: F, value: Any) -> Any:
    """``value`` for an absent field, or a FormatError when the schema requires it."""
    if f.required:
        r.field_fail(where, f.name, pos, "required field is missing")
    return value


def _lazy(get: Callable[[type], Any], cls: type) -> Callable[[], Any]:
    """``get(cls)`` on first use (tables may refer to tables declared later)."""
    cache: list[Any] = []

    def resolve() -> Any:
        if not cache:
            cache.append(get(cls))
        return cache[0]

    return resolve


# ---------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------


class _Writer:
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


def _compile_writer(schema: Schema, cls: type, decl: _Slots) -> _Write:
    qual = cls.__name__ if cls is decl.cls else decl.cls.__name__
    children: list[tuple[str, int, Callable[[_Writer, Any], Any]]] = []
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

    def write(w: _Writer, obj: Any) -> int:
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
    convert = base.convert
    default = convert(0 if f.default is None else f.default)
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


def _child_builder(f: F, qual: str) -> Callable[[_Writer, Any], Any]:
    t = f.type
    if t is STRING:
        return lambda w, v: w.b.CreateString(v)
    if isinstance(t, Bytes):
        default_align, key = t.align, t.key

        def build_bytes(w: _Writer, v: Any) -> int:
            view = as_byte_view(v, qual)
            align = w.aligns.get(key, default_align) if key else default_align
            return raw_vector(w.b, view, 1, len(view), align)

        return build_bytes
    if isinstance(t, Union):
        members = t.members

        def build_union(w: _Writer, v: Any) -> tuple[int, int]:
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


# ---------------------------------------------------------------------------------------
# Small helpers shared by the container formats
# ---------------------------------------------------------------------------------------


def check_alignment(value: int, name: str) -> int:
    """``value`` if it is a positive power of two, else a FormatError."""
    if not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise FormatError(
            f"{name} must be a positive power of two, got {value!r}. Use e.g. 16 or 128."
        )
    return value


def aligned(n: int, alignment: int) -> int:
    """``n`` rounded up to a multiple of ``alignment``."""
    return (n + alignment - 1) // alignment * alignment


def as_byte_view(data: Any, what: str, error: type[FormatError] = FormatError) -> memoryview:
    """``data`` (bytes, bytearray, memoryview, C-contiguous array) as a flat byte view, no copy.

    ``len()`` of the result is the byte count, which ``len()`` of e.g. a NumPy array is not.
    """
    try:
        return memoryview(data).cast("B")
    except TypeError as e:
        raise error(
            f"{what} must be a contiguous bytes-like object, got {type(data).__name__} ({e}). "
            "Pass bytes or a C-contiguous array."
        ) from None
