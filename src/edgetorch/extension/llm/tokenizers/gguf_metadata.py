"""GGUF key/value metadata (llama.cpp's format), read with every claimed count checked.

The ``gguf`` package's ``GGUFReader`` trusts the file: an array that claims 2^64 items past the
end of the file loops forever (each empty read advances by zero bytes), nested arrays recurse
without limit, short reads surface as IndexError, bad names as UnicodeDecodeError; and it
builds a NumPy view per string, ~15 s for SmolLM2's vocabulary. A tokenizer needs only the
metadata section, so this reads that section alone: each length is checked against the bytes
left before anything is allocated, loops run at most as often as the file has bytes for, and
anything malformed is a :class:`~edgetorch.errors.TokenizerError` naming the key and offset.

Layout (GGUF v2/v3, either byte order): ``GGUF``, version u32, tensor count u64, KV count u64,
then per KV: key (u64 length + UTF-8), value type u32, value. Strings are u64 length + bytes;
arrays are item type u32, count u64, items.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable
from typing import Any

from ....errors import TokenizerError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
_STRING, _ARRAY = 8, 9
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
MAX_KEYS = 65_536  # real files have a few dozen
MAX_KEPT_ITEMS = 8_000_000  # array items materialised in all (a vocabulary has < 300,000)
MAX_STRINGS = 16_000_000  # strings read or skipped in all
MAX_DEPTH = 4  # arrays of arrays


class _Cursor:
    def __init__(self, buf: Any, name: str) -> None:
        self.buf, self.name, self.pos, self.order = buf, name, 0, "<"
        self.kept = self.strings = 0

    def fail(self, message: str) -> None:
        raise TokenizerError(f"GGUF file {self.name} is malformed at byte {self.pos}: {message}; "
                             "check that it is a complete .gguf file")

    def need(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or n > len(self.buf) - start:
            self.fail(f"{what} needs {n} bytes, {len(self.buf) - start} are left")
        self.pos = start + n
        return start

    def scalar(self, code: str, what: str) -> Any:
        fmt = struct.Struct(self.order + code)
        return fmt.unpack_from(self.buf, self.need(fmt.size, what))[0]

    def string(self, what: str, keep: bool = True) -> str | None:
        self.strings += 1
        if self.strings > MAX_STRINGS:
            self.fail(f"more than {MAX_STRINGS} strings")
        n = self.scalar("Q", f"the length of {what}")
        start = self.need(n, what)
        if not keep:
            return None
        try:
            return bytes(self.buf[start:start + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            self.pos = start
            self.fail(f"{what} is not UTF-8 ({e.reason} at byte {e.start})")
        return None  # unreachable: fail raises

    def value(self, kind: int, what: str, keep: bool, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what, keep)
        if kind != _ARRAY:
            self.fail(f"{what} has unknown value type {kind}")
        if depth >= MAX_DEPTH:
            self.fail(f"{what} nests arrays deeper than {MAX_DEPTH}")
        item = self.scalar("I", f"the item type of {what}")
        count = self.scalar("Q", f"the item count of {what}")
        smallest = struct.calcsize(_SCALARS[item]) if item in _SCALARS else \
            8 if item == _STRING else 12 if item == _ARRAY else None
        if smallest is None:
            self.fail(f"{what} has unknown item type {item}")
        if count * smallest > len(self.buf) - self.pos:
            self.fail(f"{what} claims {count} items, more than the {len(self.buf) - self.pos} "
                      "bytes left can hold")
        if keep:
            self.kept += count
            if self.kept > MAX_KEPT_ITEMS:
                self.fail(f"more than {MAX_KEPT_ITEMS} array items in the kept keys")
        if item in _SCALARS:  # one unpack for the whole array
            start = self.need(count * smallest, what)
            if not keep:
                return None
            return list(struct.unpack_from(f"{self.order}{count}{_SCALARS[item]}", self.buf,
                                           start))
        if not keep:
            for _ in range(count):
                self.value(item, f"an item of {what}", False, depth + 1)
            return None
        return [self.value(item, f"an item of {what}", True, depth + 1) for _ in range(count)]


def read_gguf_metadata(source: str | os.PathLike | bytes | bytearray | memoryview,
                       keep: Callable[[str], bool] = lambda key: True) -> dict[str, Any]:
    """The metadata values whose key ``keep`` accepts (arrays as lists), of a GGUF file (path)
    or its bytes. Tensors are not read."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _read(memoryview(source).cast("B"), "<bytes>", keep)
    name = os.fspath(source)
    try:
        with open(name, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise TokenizerError(f"GGUF file {name} is empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                return _read(mm, name, keep)
    except OSError as e:
        raise TokenizerError(f"cannot read GGUF file {name}: {e}") from e


def _read(buf: Any, name: str, keep: Callable[[str], bool]) -> dict[str, Any]:
    c = _Cursor(buf, name)
    if bytes(buf[:4]) != MAGIC:
        c.fail("no GGUF magic (the file does not start with 'GGUF')")
    c.pos = 4
    version = c.scalar("I", "the version")
    if version & 0xFFFF == 0:  # written on a big-endian machine
        c.order, version = ">", int.from_bytes(struct.pack("<I", version), "big")
    if version not in VERSIONS:
        c.fail(f"version {version} (this reader knows {list(VERSIONS)})")
    c.scalar("Q", "the tensor count")
    n_keys = c.scalar("Q", "the key count")
    if n_keys > MAX_KEYS:
        c.fail(f"{n_keys} metadata keys (limit {MAX_KEYS})")
    fields: dict[str, Any] = {}
    for i in range(n_keys):
        key = c.string(f"key {i}")
        assert key is not None
        kind = c.scalar("I", f"the type of {key!r}")
        wanted = keep(key)
        value = c.value(kind, repr(key), wanted)
        if wanted:
            if key in fields:
                c.fail(f"key {key!r} appears twice")
            fields[key] = value
    return fields
