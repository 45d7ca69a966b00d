"""Small helpers on top of ``flatbuffers.Builder`` shared by the .pte and .ptd writers.

Vectors of scalars are written in one block instead of one ``Prepend`` per element. The bytes
are identical to the per-element loop that flatc-generated ``Pack`` code runs: ``StartVector``
already aligns the end of the vector, so the per-element ``Prep`` calls never add padding.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import flatbuffers

from ..errors import FormatError


def raw_vector(
    builder: flatbuffers.Builder,
    raw: bytes | memoryview,
    elem_size: int,
    count: int,
    alignment: int,
) -> int:
    """Write ``raw`` (``count`` little-endian elements) as a vector aligned to ``alignment``."""
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


def as_byte_view(data, what: str, error: type[FormatError] = FormatError) -> memoryview:
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
