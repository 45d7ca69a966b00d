"""The checked reader of the flatbuffer engine: closures compiled per class from a schema.

Nothing here trusts the buffer: see ``edgetorch.schema.fbs`` for the guarantees.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ...errors import FormatError
from .types import STRING, Bytes, Enum, F, Scalar, Struct, Union

if TYPE_CHECKING:
    from . import Schema, TableDecl

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16X2 = struct.Struct("<HH")
_BUDGET_FACTOR = 4  # a well-formed buffer decodes at most its own size; allow slack
_BUDGET_SLACK = 1 << 16

# ---------------------------------------------------------------------------------------
# Error paths: (parent, label) tuples, rendered only when something fails
# ---------------------------------------------------------------------------------------


def _render(where: Any) -> str:
    parts: list[str] = []
    while isinstance(where, tuple):
        where, label = where[0], where[1]
        parts.append(f"[{label}]" if isinstance(label, int) else f".{label}")
    return str(where) + "".join(reversed(parts))


class BufferReader:
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

    def u32(self, pos: int) -> int:
        return int(_U32.unpack_from(self.buf, pos)[0])

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
# Readers
# ---------------------------------------------------------------------------------------


def compile_reader(schema: Schema, cls: type, decl: TableDecl,
                   inline: bool = True) -> Callable[[BufferReader, int, Any], Any]:
    """One function per table class, generated: scalar and enum fields are read inline
    (bounds checked through ``BufferReader.field``, unknown enum values refused, no call per
    field: most of a program's fields are scalars). With ``inline`` the vtable (when cached),
    unions, table fields and scalar vectors are too, their common case; anything else
    (absent required fields, offsets or lengths out of bounds) goes to the field's reader,
    which raises the error. The others always go through their field readers."""
    ns: dict[str, Any] = {"cls": cls, "I32": _I32.unpack_from, "U32": _U32.unpack_from}
    body = ["def read(r, pos, where):",
            "    buf = r.buf",
            "    size = r.size"]
    if inline:
        # The vtable: a table whose vtable was read before (most of them: tables of one
        # kind share a few vtables) is checked and charged here; anything else goes to
        # r.vtable, which reads, checks and caches it (and fails the same way).
        body += ["    e = r.vtables.get(pos - I32(buf, pos)[0]) if 0 <= pos <= size - 4 else None",
                 "    if e is None or e[0] < 4 or pos + e[0] > size:",
                 "        vt = r.vtable(pos, where)",
                 "    else:",
                 "        r.budget -= e[0]",
                 "        if r.budget < 0:",
                 "            r.charge(0, where)",
                 "        vt = e[1]"]
    else:
        body.append("    vt = r.vtable(pos, where)")
    body.append("    nvt = len(vt)")
    names = []
    for i, (f, slot) in enumerate(decl.fields):
        a = f"a{i}"
        names.append(a)
        if isinstance(f.type, (Scalar, Enum)):
            base, members, default = _scalar_parts(f)
            ns[f"U{i}"], ns[f"D{i}"], ns[f"N{i}"] = base.st.unpack_from, default, f.name
            body += [f"    off = vt[{slot}] if {slot} < nvt else 0",
                     "    if off:",
                     f"        if off < 4 or pos + off + {base.size} > r.size:",
                     f"            r.field(pos, vt, {slot}, {base.size}, where, N{i})",
                     f"        {a} = U{i}(buf, pos + off)[0]"]
            if members is not None:
                ns[f"M{i}"] = members
                ns[f"E{i}"] = f.type.cls.__name__
                body += [f"        v = M{i}.get({a})",
                         "        if v is None:",
                         f"            r.field_fail(where, N{i}, pos, f'{{{a}}} is not a valid "
                         f"{{E{i}}}')",
                         f"        {a} = v"]
            body += ["    else:",
                     f"        {a} = D{i}"]
        elif inline and isinstance(f.type, Union):
            # inline when the tag and the offset are in the buffer and the tag names a
            # member; otherwise the union's reader, which checks each and fails
            read_union, members, labels, fill = _union_parts(schema, f, slot)
            ns[f"R{i}"], ns[f"RD{i}"], ns[f"LB{i}"], ns[f"FILL{i}"] = \
                read_union, members, labels, fill
            body += [f"    toff = vt[{slot - 1}] if {slot - 1} < nvt else 0",
                     f"    voff = vt[{slot}] if {slot} < nvt else 0",
                     "    tag = buf[pos + toff] if 4 <= toff and pos + toff < size else 0",
                     f"    if 0 < tag <= {len(labels)} and 4 <= voff and pos + voff + 4 <= size:",
                     "        target = pos + voff + U32(buf, pos + voff)[0]",
                     "    else:",
                     "        target = size",
                     "    if target + 4 <= size:",
                     f"        if not RD{i}:",
                     f"            FILL{i}()",
                     f"        {a} = RD{i}[tag - 1](r, target, (where, LB{i}[tag - 1]))",
                     "    else:",
                     f"        {a} = R{i}(r, pos, vt, where)"]
        elif inline and (isinstance(f.type, type) or (isinstance(f.type, list)
                                                     and isinstance(f.type[0], Scalar))):
            # a table or a vector of scalars: inline when the offset and what it points to
            # are in the buffer (and the budget allows); otherwise (absent, or anything out
            # of bounds) the field's reader, which checks each and fails
            ns[f"R{i}"], ns[f"N{i}"] = _field_reader(schema, f, slot), f.name
            body += [f"    off = vt[{slot}] if {slot} < nvt else 0",
                     "    t = pos + off + U32(buf, pos + off)[0] if 4 <= off and "
                     "pos + off + 4 <= size else size"]
            if not f.required:  # absent: its default here
                ns[f"ABS{i}"] = f.default if isinstance(f.type, type) else \
                    (lambda: None) if f.optional else list
                body += ["    if not off:",
                         f"        {a} = None if ABS{i} is None else ABS{i}()",
                         "        t = -1"]
            if isinstance(f.type, type):
                ns[f"SUB{i}"] = _lazy(schema.reader, f.type)
                body += ["    if 0 <= t and t + 4 <= size:",
                         f"        {a} = SUB{i}()(r, t, (where, N{i}))"]
            else:
                elem = f.type[0]
                ns[f"UV{i}"] = struct.unpack_from
                body += ["    n = U32(buf, t)[0] if 0 <= t and t + 4 <= size else -1",
                         f"    if 0 <= n and n * {elem.size} <= size - t - 4:",
                         f"        r.budget -= n * {elem.size}",
                         "        if r.budget < 0:",
                         f"            r.charge(0, (where, N{i}))",
                         f"        {a} = list(UV{i}(f'<{{n}}{elem.code}', buf, t + 4))"]
            body += ["    elif t >= 0:",
                     f"        {a} = R{i}(r, pos, vt, where)"]
        else:
            ns[f"R{i}"] = _field_reader(schema, f, slot)
            body.append(f"    {a} = R{i}(r, pos, vt, where)")
    body.append(f"    return cls({', '.join(names)})")
    exec(compile("\n".join(body) + "\n", f"<flatbuffer reader of {cls.__name__}>", "exec"),  # noqa: S102
         ns)
    return ns["read"]


def _field_reader(schema: Schema, f: F, slot: int) -> Callable[..., Any]:
    name, t = f.name, f.type  # (scalars and enums: read inline, see compile_reader)
    if isinstance(t, Union):
        return _union_reader(schema, f, slot)
    if isinstance(t, Struct):
        unpack, size, cls, factory = t.st.unpack_from, t.size, t.cls, f.default

        def read_struct(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
            p = r.field(pos, vt, slot, size, where, name)
            if p:
                return cls(*unpack(r.buf, p))
            return _absent(r, pos, where, f, None if factory is None else factory())

        return read_struct
    absent: Any = None if f.optional else ""
    if t is STRING:
        def read_string(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
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

        def read_bytes(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
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

        def read_table(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target >= 0:
                return sub()(r, target, (where, name))
            if required:
                _absent(r, pos, where, f, None)
            return None if factory is None else factory()

        return read_table
    raise TypeError(f"field {name}: unsupported type {t!r}")


def _scalar_parts(f: F) -> tuple[Scalar, dict[int, Any] | None, Any]:
    """(stored type, enum members by value or None, value when absent) of a scalar field."""
    if isinstance(f.type, Enum):
        members = f.type.members()
        default = members[0] if f.default is None else f.default
        return f.type.base, members, default
    return f.type, None, f.type.convert(0) if f.default is None else f.default


def _vector_reader(schema: Schema, f: F, slot: int, elem: Any) -> Callable[..., Any]:
    name = f.name
    optional = f.optional
    if isinstance(elem, Scalar):
        code, esize = elem.code, elem.size

        def read_scalars(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target < 0:
                return _absent(r, pos, where, f, None if optional else [])
            start, length = r.vector(target, esize, where, name)
            return list(struct.unpack_from(f"<{length}{code}", r.buf, start))

        return read_scalars
    if isinstance(elem, Struct):
        st, ssize, scls = elem.st, elem.size, elem.cls

        def read_structs(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
            target = r.deref(pos, vt, slot, where, name)
            if target < 0:
                return _absent(r, pos, where, f, None if optional else [])
            start, length = r.vector(target, ssize, where, name)
            return [scls(*v) for v in st.iter_unpack(r.buf[start : start + length * ssize])]

        return read_structs
    sub = _lazy(schema.reader, elem)
    unwrap = f.unwrap

    def read_tables(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
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
    return _union_parts(schema, f, slot)[0]


def _union_parts(schema: Schema, f: F, slot: int) -> tuple[Callable[..., Any], list[Any],
                                                           list[str], Callable[[], None]]:
    """The checked reader of a union field, the list of its members' readers (filled by the
    last element, on first use: members may be declared later) and their path labels."""
    name, members = f.name, f.type.members
    tag_slot, count = slot - 1, len(members)
    tag_name = name + "_type"
    labels = [f"{name}<{m.__name__}>" for m in members]  # made once, not per value
    readers: list[Any] = []

    def fill() -> None:
        if not readers:
            readers.extend(schema.reader(m) for m in members)

    def read_union(r: BufferReader, pos: int, vt: tuple, where: Any) -> Any:
        p = r.field(pos, vt, tag_slot, 1, where, tag_name)
        tag = r.buf[p] if p else 0
        if tag == 0:
            r.field_fail(where, name, pos, "union has no value (type NONE)")
        if tag > count:
            r.field_fail(where, name, pos,
                         f"union type tag {tag} is not one of the {count} members")
        target = r.deref(pos, vt, slot, where, name)
        if target < 0:
            r.field_fail(where, name, pos,
                         f"union type is {members[tag - 1].__name__} but the value is missing")
        fill()
        return readers[tag - 1](r, target, (where, labels[tag - 1]))

    return read_union, readers, labels, fill


def _absent(r: BufferReader, pos: int, where: Any, f: F, value: Any) -> Any:
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


