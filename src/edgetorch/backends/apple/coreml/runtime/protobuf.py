"""A small, checked protobuf reader for the parts of Core ML's ``Model.proto`` and
``MIL.proto`` the runtime needs, so the runtime depends on neither coremltools nor the
``protobuf`` package.

A schema is ``{field number: Field}``; a message decodes to a dict of field names (absent
fields are absent; repeated fields are lists; map fields are dicts; packed and unpacked
repeated scalars both read). Unknown fields are skipped. Every length is checked against the
buffer, nesting is bounded, and each field consumes at least one byte, so work is linear in
the input. Any problem raises ``FormatError`` naming the message and field.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .....errors import FormatError

VARINT, I64, LEN, I32 = 0, 1, 2, 5
MAX_DEPTH = 100
_HINT = "The Core ML model is truncated or corrupted; re-export it."


@dataclass(frozen=True)
class Field:
    """``kind``: "int", "sint64" (two's complement int64), "bool", "float", "double",
    "string", "bytes", "message" (with ``schema``), or "map" (``schema`` of the entry:
    field 1 key, field 2 value)."""

    name: str
    kind: str
    repeated: bool = False
    schema: dict | None = None


def _varint(buf: memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= end:
            raise FormatError(f"{where}: a varint runs past the end of its message. {_HINT}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise FormatError(f"{where}: a varint is longer than 10 bytes. {_HINT}")


_PACKED = {"float": ("<f", 4), "double": ("<d", 8)}


def _scalar(kind: str, wire: int, raw: Any, where: str) -> Any:
    if kind in ("int", "sint64", "bool"):
        if wire != VARINT:
            raise FormatError(f"{where}: expected a varint, got wire type {wire}. {_HINT}")
        if kind == "bool":
            return raw != 0
        return raw - (1 << 64) if kind == "sint64" and raw >= 1 << 63 else raw
    if kind == "float":
        if wire != I32:
            raise FormatError(f"{where}: expected a 32-bit float, got wire type {wire}. {_HINT}")
        return struct.unpack("<f", raw)[0]
    if kind == "double":
        if wire != I64:
            raise FormatError(f"{where}: expected a 64-bit float, got wire type {wire}. {_HINT}")
        return struct.unpack("<d", raw)[0]
    raise FormatError(f"{where}: unsupported field kind {kind}")


def decode(data: bytes | memoryview, schema: dict, what: str, depth: int = 0) -> dict:
    """Decode one message of ``schema`` from ``data``."""
    buf = memoryview(data).cast("B")
    return _decode(buf, 0, len(buf), schema, what, depth)


def _decode(buf: memoryview, pos: int, end: int, schema: dict, what: str, depth: int) -> dict:
    if depth > MAX_DEPTH:
        raise FormatError(f"{what}: messages nest more than {MAX_DEPTH} deep. {_HINT}")
    out: dict[str, Any] = {}
    while pos < end:
        key, pos = _varint(buf, pos, end, what)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            raw, pos = _varint(buf, pos, end, what)
        elif wire == I64 or wire == I32:
            n = 8 if wire == I64 else 4
            if pos + n > end:
                raise FormatError(f"{what}: field {number} runs past the end. {_HINT}")
            raw, pos = bytes(buf[pos:pos + n]), pos + n
        elif wire == LEN:
            n, pos = _varint(buf, pos, end, what)
            if n > end - pos:
                raise FormatError(f"{what}: field {number} claims {n} bytes, {end - pos} "
                                  f"remain. {_HINT}")
            raw, pos = (pos, pos + n), pos + n
        else:
            raise FormatError(f"{what}: field {number} has wire type {wire}, which this reader "
                              f"does not take (groups). {_HINT}")
        f = schema.get(number)
        if f is None:
            continue  # a field this runtime does not need
        where = f"{what}.{f.name}"
        values = _values(buf, f, wire, raw, where, depth)
        if f.kind == "map":
            m = out.setdefault(f.name, {})
            for entry in values:
                m[entry.get("key")] = entry.get("value")
        elif f.repeated:
            out.setdefault(f.name, []).extend(values)
        else:
            out[f.name] = values[-1]  # the last one wins, as in protobuf
    return out


def _values(buf: memoryview, f: Field, wire: int, raw: Any, where: str, depth: int) -> list:
    if f.kind in ("message", "map"):
        if wire != LEN:
            raise FormatError(f"{where}: expected a message, got wire type {wire}. {_HINT}")
        start, stop = raw
        return [_decode(buf, start, stop, f.schema, where, depth + 1)]
    if f.kind in ("string", "bytes"):
        if wire != LEN:
            raise FormatError(f"{where}: expected bytes, got wire type {wire}. {_HINT}")
        start, stop = raw
        if f.kind == "bytes":
            return [buf[start:stop]]
        try:
            return [bytes(buf[start:stop]).decode("utf-8")]
        except UnicodeDecodeError as e:
            raise FormatError(f"{where}: not UTF-8 ({e}). {_HINT}") from None
    if wire == LEN and f.repeated:  # packed
        start, stop = raw
        if f.kind in _PACKED:
            fmt, size = _PACKED[f.kind]
            if (stop - start) % size:
                raise FormatError(f"{where}: {stop - start} packed bytes are not a whole "
                                  f"number of {size}-byte values. {_HINT}")
            return list(struct.unpack(f"<{(stop - start) // size}{fmt[1]}",
                                      bytes(buf[start:stop])))
        vals, pos = [], start
        while pos < stop:
            v, pos = _varint(buf, pos, stop, where)
            vals.append(_scalar(f.kind, VARINT, v, where))
        return vals
    return [_scalar(f.kind, wire, raw, where)]


def message(**fields: Field) -> dict:
    """A schema from ``number=Field`` keywords written as ``f<number>``."""
    return {int(k[1:]): v for k, v in fields.items()}
