"""Field types of the flatbuffer engine: scalars, enums, strings, byte vectors, unions, structs,
the ``F`` field declaration, and small helpers shared by the container formats."""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import AlignmentError, FormatError

OBJECT_API = "object_api"  # flatc's generated Python Pack methods
FLATC = "flatc"  # the flatc compiler reading JSON

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
    """An enum field: values of ``cls`` stored as ``base``; unknown values are a FormatError.

    An ``IntEnum`` is stored as its value; any other enum (one whose values are the schema's
    names, as ExecuTorch's Python dataclasses keep them) as its position, which is what a
    schema enum without explicit values means."""

    cls: type[enum.Enum]
    base: Scalar = BYTE

    def code(self, member: Any) -> int:
        if isinstance(member, int):
            return int(member)
        return list(self.cls).index(self.cls(member))

    def members(self) -> dict[int, Any]:
        return {self.code(m): m for m in self.cls}


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
# Small helpers shared by the container formats
# ---------------------------------------------------------------------------------------


def check_alignment(value: int, name: str) -> int:
    """``value`` if it is a positive power of two, else an AlignmentError."""
    if not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise AlignmentError(
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

