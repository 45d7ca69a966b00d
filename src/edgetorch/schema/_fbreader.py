"""Bounds-checked primitives for reading FlatBuffers from untrusted bytes.

The ``flatbuffers`` package's accessors trust the buffer: a corrupt offset makes them raise
arbitrary exceptions, read garbage or allocate whatever a length field claims. Everything here
checks each offset, vtable, length and string against the real buffer first and raises the
caller's error class (``FormatError`` or a subclass) naming the table, field and byte offset.

Two more guarantees, because a file is attacker-controlled:

* A vector's claimed length times its element size must fit in the bytes that follow it, so a
  forged length can never cause a large allocation or a long loop.
* Decoding work is bounded by a budget proportional to the buffer size. A well-formed buffer
  decodes each object once, so its total size is at most the buffer size; a forged buffer that
  points many offsets at one large object (to amplify work quadratically) runs out of budget.

Recursion needs no explicit bound: the readers built on these primitives follow the schema,
which is not recursive, so nesting depth is fixed by the schema, not by the data.
"""

from __future__ import annotations

import struct
from typing import NoReturn

from ..errors import FormatError

U8 = struct.Struct("<B")
I8 = struct.Struct("<b")
BOOL = struct.Struct("<?")
I32 = struct.Struct("<i")
U32 = struct.Struct("<I")
I64 = struct.Struct("<q")
U64 = struct.Struct("<Q")
F64 = struct.Struct("<d")
_U16X2 = struct.Struct("<HH")

# A well-formed buffer decodes at most its own size; allow generous slack for small buffers.
_BUDGET_FACTOR = 4
_BUDGET_SLACK = 1 << 16


class FbReader:
    """One flatbuffer in memory plus the checks every read goes through.

    ``what`` names the buffer in error messages (e.g. ``".pte program"``), ``hint`` is appended
    to every message to say what to try, and ``error`` is the exception class raised.
    """

    __slots__ = ("buf", "size", "what", "hint", "error", "_budget", "_vtables")

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        *,
        what: str,
        hint: str,
        error: type[FormatError] = FormatError,
    ) -> None:
        buf = memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        self.buf = buf
        self.size = len(buf)
        self.what = what
        self.hint = hint
        self.error = error
        self._budget = _BUDGET_FACTOR * self.size + _BUDGET_SLACK
        # vtable position -> (object size, field offsets); vtables are shared between tables.
        self._vtables: dict[int, tuple[int, tuple[int, ...]]] = {}

    def fail(self, where: str, message: str) -> NoReturn:
        raise self.error(f"{self.what} is malformed: {where}: {message}. {self.hint}")

    def charge(self, nbytes: int, where: str) -> None:
        """Spend decoding budget; fails when a buffer makes us decode far more than it holds."""
        self._budget -= nbytes
        if self._budget < 0:
            self.fail(
                where,
                f"decoding would touch more than {_BUDGET_FACTOR}x the {self.size}-byte buffer "
                "(many offsets point at the same large object)",
            )

    def identifier(self) -> bytes:
        """The 4-byte file identifier (bytes 4..8)."""
        if self.size < 8:
            self.fail(
                "header", f"buffer is {self.size} bytes, smaller than the 8-byte flatbuffer prefix"
            )
        return bytes(self.buf[4:8])

    def root(self, name: str) -> Table:
        """The root table, whose offset is the first 4 bytes of the buffer."""
        if self.size < 8:
            self.fail(
                name, f"buffer is {self.size} bytes, smaller than the 8-byte flatbuffer prefix"
            )
        (offset,) = U32.unpack_from(self.buf, 0)
        if offset < 8:
            self.fail(name, f"root table offset {offset:#x} points into the 8-byte prefix")
        return self.table(offset, name)

    def table(self, pos: int, where: str) -> Table:
        """The table at absolute position ``pos``, with its vtable checked."""
        size = self.size
        if pos < 0 or pos + 4 > size:
            self.fail(where, f"table at offset {pos:#x} lies outside the {size}-byte buffer")
        (soffset,) = I32.unpack_from(self.buf, pos)
        vpos = pos - soffset
        vt = self._vtables.get(vpos)
        if vt is None:
            if vpos < 0 or vpos + 4 > size:
                self.fail(where, f"vtable of table at {pos:#x} is at {vpos:#x}, outside the buffer")
            vsize, osize = _U16X2.unpack_from(self.buf, vpos)
            if vsize < 4 or vsize % 2 or vpos + vsize > size:
                self.fail(where, f"vtable at {vpos:#x} has invalid size {vsize}")
            nfields = (vsize - 4) // 2
            vt = (osize, struct.unpack_from(f"<{nfields}H", self.buf, vpos + 4))
            self._vtables[vpos] = vt
        osize, fields = vt
        if osize < 4 or pos + osize > size:
            self.fail(where, f"table at {pos:#x} claims {osize} bytes, past the end of the buffer")
        self.charge(osize, where)
        return Table(self, pos, osize, fields, where)


class Table:
    """A checked view of one table. Field accessors take the vtable slot (field id) and name."""

    __slots__ = ("r", "pos", "osize", "fields", "where")

    def __init__(
        self, reader: FbReader, pos: int, osize: int, fields: tuple[int, ...], where: str
    ) -> None:
        self.r = reader
        self.pos = pos
        self.osize = osize
        self.fields = fields
        self.where = where

    def fail(self, name: str, message: str) -> NoReturn:
        self.r.fail(f"{self.where}.{name} (table at {self.pos:#x})", message)

    def _field(self, slot: int, width: int, name: str) -> int:
        """Absolute position of a field, or 0 when it is absent (so it takes its default)."""
        fields = self.fields
        if slot >= len(fields):
            return 0
        off = fields[slot]
        if off == 0:
            return 0
        # flatbuffers' own verifier bounds a field by the buffer, not by the table's declared
        # object size (ExecuTorch writes Double EValues whose 8-byte field ends past it).
        if off < 4 or self.pos + off + width > self.r.size:
            self.fail(name, f"field offset {off} of the table runs past the end of the buffer")
        return self.pos + off

    def has(self, slot: int) -> bool:
        return slot < len(self.fields) and self.fields[slot] != 0

    def scalar(self, slot: int, st: struct.Struct, default: int | float | bool, name: str):
        pos = self._field(slot, st.size, name)
        return st.unpack_from(self.r.buf, pos)[0] if pos else default

    def _deref(self, slot: int, name: str) -> int:
        """Target of an offset field, or -1 when absent; the target's 4-byte head is in bounds."""
        pos = self._field(slot, 4, name)
        if not pos:
            return -1
        (off,) = U32.unpack_from(self.r.buf, pos)
        target = pos + off
        if target + 4 > self.r.size:
            self.fail(
                name,
                f"offset {off:#x} at {pos:#x} points to {target:#x}, "
                f"past the end of the {self.r.size}-byte buffer",
            )
        return target

    def table(self, slot: int, name: str) -> Table | None:
        target = self._deref(slot, name)
        if target < 0:
            return None
        return self.r.table(target, f"{self.where}.{name}")

    def vector(self, slot: int, elem_size: int, name: str) -> tuple[int, int] | None:
        """(start, length) of a vector field, or None when absent."""
        target = self._deref(slot, name)
        if target < 0:
            return None
        (length,) = U32.unpack_from(self.r.buf, target)
        start = target + 4
        nbytes = length * elem_size
        if nbytes > self.r.size - start:
            self.fail(
                name,
                f"vector at {target:#x} claims {length} elements of {elem_size} bytes, "
                f"past the end of the {self.r.size}-byte buffer",
            )
        self.r.charge(nbytes, f"{self.where}.{name}")
        return start, length

    def scalars(self, slot: int, code: str, elem_size: int, name: str) -> list | None:
        """A vector of scalars (struct code ``code``) as a list, or None when absent."""
        vec = self.vector(slot, elem_size, name)
        if vec is None:
            return None
        start, length = vec
        return list(struct.unpack_from(f"<{length}{code}", self.r.buf, start))

    def ubytes(self, slot: int, name: str) -> memoryview | None:
        """A ``[ubyte]`` vector as a zero-copy slice of the buffer, or None when absent."""
        vec = self.vector(slot, 1, name)
        if vec is None:
            return None
        start, length = vec
        return self.r.buf[start : start + length]

    def string(self, slot: int, name: str) -> str | None:
        vec = self.vector(slot, 1, name)
        if vec is None:
            return None
        start, length = vec
        buf = self.r.buf
        if start + length >= self.r.size or buf[start + length] != 0:
            self.fail(name, f"string at {start - 4:#x} is not NUL-terminated")
        try:
            return str(buf[start : start + length], "utf-8")
        except UnicodeDecodeError as e:
            self.fail(name, f"string at {start - 4:#x} is not valid UTF-8 ({e.reason})")

    def tables(self, slot: int, name: str) -> list[Table] | None:
        """A vector of tables, each checked, or None when absent."""
        vec = self.vector(slot, 4, name)
        if vec is None:
            return None
        start, length = vec
        offsets = struct.unpack_from(f"<{length}I", self.r.buf, start)
        table = self.r.table
        where = f"{self.where}.{name}"
        return [table(start + 4 * i + off, f"{where}[{i}]") for i, off in enumerate(offsets)]

    def union(self, type_slot: int, value_slot: int, members: tuple[type, ...], name: str):
        """(member class, table) of a union field; NONE, unknown tags and missing values fail."""
        tag = self.scalar(type_slot, U8, 0, f"{name}_type")
        if tag == 0:
            self.fail(name, "union has no value (type NONE)")
        if tag > len(members):
            self.fail(name, f"union type tag {tag} is not one of the {len(members)} members")
        cls = members[tag - 1]
        target = self._deref(value_slot, name)
        if target < 0:
            self.fail(name, f"union type is {cls.__name__} but the value is missing")
        return cls, self.r.table(target, f"{self.where}.{name}<{cls.__name__}>")
