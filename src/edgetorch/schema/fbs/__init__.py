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
from typing import Any

from ...errors import FormatError
from .reader import BufferReader, compile_reader
from .types import (
    BOOL,
    BYTE,
    DOUBLE,
    FLATC,
    FLOAT,
    INT,
    LONG,
    OBJECT_API,
    SHORT,
    STRING,
    UBYTE,
    UINT,
    ULONG,
    USHORT,
    Bytes,
    Enum,
    F,
    Scalar,
    String,
    Struct,
    Union,
    aligned,
    as_byte_view,
    check_alignment,
)
from .writer import TableWriter, compile_writer, raw_vector, scalar_vector, table_vector

__all__ = [
    "BOOL", "BYTE", "DOUBLE", "FLATC", "FLOAT", "INT", "LONG", "OBJECT_API", "SHORT", "STRING",
    "UBYTE", "UINT", "ULONG", "USHORT", "Bytes", "Enum", "F", "Scalar", "Schema", "String",
    "Struct", "Union", "aligned", "as_byte_view", "check_alignment", "raw_vector",
    "scalar_vector", "table_vector",
]

# ---------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------

_Read = Callable[[BufferReader, int, Any], Any]
_Write = Callable[[TableWriter, Any], int]


@dataclass
class TableDecl:
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
        self.tables: dict[type, TableDecl] = {cls: _resolve(cls, fs) for cls, fs in tables.items()}
        self._readers: dict[type, _Read] = {}
        self._writers: dict[type, _Write] = {}
        # Generated readers read common fields inline; tests switch it off (on a copy) to
        # compare with the field readers alone.
        self.inline = True

    def _decl(self, cls: type) -> TableDecl:
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
        w = TableWriter(self, aligns or {})
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
            fn = self._writers[cls] = compile_writer(self, cls, self._decl(cls))
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
        r = BufferReader(data, what, hint, error)
        if size_prefixed:
            if r.size < 4:
                r.fail(root.__name__, f"buffer is {r.size} bytes, too small for a size prefix")
            claimed = r.u32(0)
            if claimed > r.size - 4:
                r.fail(root.__name__, f"size prefix says {claimed} bytes follow, but only "
                                      f"{r.size - 4} do")
            r = BufferReader(r.buf[4 : 4 + claimed], what, hint, error)
        if r.size < 8:
            r.fail(root.__name__, f"buffer is {r.size} bytes, smaller than the 8-byte "
                                  "flatbuffer prefix")
        ident = bytes(r.buf[4:8])
        if identifiers and ident not in identifiers:
            expected = " or ".join(repr(i) for i in identifiers)
            r.fail("file identifier", f"has identifier {ident!r}, expected {expected}")
        offset = r.u32(0)
        if offset < 8:
            r.fail(root.__name__, f"root table offset {offset:#x} points into the 8-byte prefix")
        return self.reader(root)(r, offset, root.__name__)

    def reader(self, cls: type) -> _Read:
        fn = self._readers.get(cls)
        if fn is None:
            fn = self._readers[cls] = compile_reader(self, cls, self._decl(cls), self.inline)
        return fn


def _resolve(cls: type, fields: list[F]) -> TableDecl:
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
    return TableDecl(cls, out)


