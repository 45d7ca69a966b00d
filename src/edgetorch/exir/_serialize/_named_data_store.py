"""``NamedDataStore``: bytes a backend stores in the program under a key (ExecuTorch's names).

A backend's ``preprocess`` adds its weights here (``add_named_data(key, data, alignment)``)
and returns ``store.get_named_data_store_output()`` as ``PreprocessResult.data_store_output``;
the emitter merges the outputs of every delegate into the program's ``named_data``, and the
runtime hands them back to the backend by key (``BackendInitContext.named_data``).

Keys are unique: adding a key again with other bytes is an error, with the same bytes a no-op.
Identical bytes under different keys are stored once (one buffer, the lcm of the alignments).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from ...errors import ExportError


@dataclass
class DataEntry:
    """Where a key's bytes are: ``buffers[buffer_index]``, to be aligned to ``alignment``."""

    buffer_index: int
    alignment: int
    tensor_layout: Any = None


@dataclass
class NamedDataStoreOutput:
    """The store's contents: unique ``buffers``, the keys stored in the ``.pte``
    (``pte_data``) and those for external files (``external_data``: file tag -> keys)."""

    buffers: list[bytes] = field(default_factory=list)
    pte_data: dict[str, DataEntry] = field(default_factory=dict)
    external_data: dict[str, dict[str, DataEntry]] = field(default_factory=dict)


class NamedDataStore:
    """Collects named bytes (see the module docstring)."""

    def __init__(self) -> None:
        self.buffers: list[bytes] = []
        self.pte_data: dict[str, DataEntry] = {}
        self.external_data: dict[str, dict[str, DataEntry]] = {}
        self._by_digest: dict[bytes, int] = {}
        self._key_digest: dict[str, bytes] = {}

    def add_named_data(self, key: str, data: bytes | bytearray | memoryview, alignment: int = 1,
                       external_tag: str | None = None, tensor_layout: Any = None) -> None:
        """Store ``data`` under ``key`` (in the ``.pte``, or in the external file
        ``external_tag``)."""
        if not isinstance(alignment, int) or alignment <= 0:
            raise ExportError(f"named data {key!r}: alignment must be a positive int, got "
                              f"{alignment!r}")
        data = bytes(data)
        digest = hashlib.sha256(data).digest()
        old = self._key_digest.get(key)
        if old is not None and old != digest:
            raise ExportError(f"named data key {key!r} was already added with different bytes "
                              f"({len(data)} bytes now); use a unique key per blob")
        index = self._by_digest.get(digest)
        if index is None:
            index = self._by_digest[digest] = len(self.buffers)
            self.buffers.append(data)
        self._key_digest[key] = digest
        table = self.pte_data if external_tag is None else self.external_data.setdefault(
            external_tag, {})
        entry = table.get(key)
        if entry is None:
            table[key] = DataEntry(index, alignment, tensor_layout)
        else:
            entry.alignment = math.lcm(entry.alignment, alignment)

    def get_named_data_store_output(self) -> NamedDataStoreOutput:
        return NamedDataStoreOutput(
            list(self.buffers), dict(self.pte_data),
            {tag: dict(keys) for tag, keys in self.external_data.items()})

    def merge_named_data_store(self, other: NamedDataStoreOutput) -> None:
        """Add everything in ``other`` (another store's output) to this store."""
        for key, entry in other.pte_data.items():
            self.add_named_data(key, other.buffers[entry.buffer_index], entry.alignment, None,
                                entry.tensor_layout)
        for tag, keys in other.external_data.items():
            for key, entry in keys.items():
                self.add_named_data(key, other.buffers[entry.buffer_index], entry.alignment, tag,
                                    entry.tensor_layout)
