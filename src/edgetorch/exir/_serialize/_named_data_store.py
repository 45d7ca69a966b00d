"""``NamedDataStore``: bytes a backend stores in the program under a key (ExecuTorch's names).

A backend's ``preprocess`` adds its weights here (``add_named_data(key, data, alignment)``)
and returns ``store.get_named_data_store_output()`` as ``PreprocessResult.data_store_output``;
the emitter merges the outputs of every delegate into the program's ``named_data``, and the
runtime hands them back to the backend by key (``BackendInitContext.named_data``).

Keys are unique across the ``.pte`` and the external files: adding a key again with other
bytes is an error, with the same bytes a no-op. Identical bytes under different keys are
stored once (one buffer; each key keeps its own alignment). Data is ``bytes``, a file that
stays on disk (``FileBackedData``) or a torch tensor (its bytes as laid out in memory, and its
``TensorLayout``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import torch

from ...errors import NamedDataError
from ..tensor_layout import TensorLayout, tensor_layout_of
from ._cord import CordBuffer, FileBackedData
from .data_serializer import DataEntry


@dataclass
class NamedDataStoreOutput:
    """The store's contents: unique ``buffers``, the keys stored in the ``.pte``
    (``pte_data``) and those for external files (``external_data``: file tag -> keys)."""

    buffers: list[CordBuffer] = field(default_factory=list)
    pte_data: dict[str, DataEntry] = field(default_factory=dict)
    external_data: dict[str, dict[str, DataEntry]] = field(default_factory=dict)


def buffer_bytes(buffer: CordBuffer) -> bytes:
    """A stored buffer's bytes (a file-backed one is read now)."""
    return buffer if isinstance(buffer, bytes) else buffer.to_bytes()


def _digest(data: CordBuffer) -> bytes:
    return data.sha256() if isinstance(data, FileBackedData) else hashlib.sha256(data).digest()


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The bytes of a dense tensor as they lie in memory (channels-last stays channels-last)."""
    tensor = tensor.detach().cpu()
    start = tensor.storage_offset() * tensor.element_size()
    return bytes(tensor.untyped_storage())[start:start + tensor.numel() * tensor.element_size()]


class NamedDataStore:
    """Collects named bytes (see the module docstring)."""

    def __init__(self) -> None:
        self.buffers: list[CordBuffer] = []
        self.pte_data: dict[str, DataEntry] = {}
        self.external_data: dict[str, dict[str, DataEntry]] = {}
        self.key_to_buffer_idx: dict[str, int] = {}
        self._by_digest: dict[bytes, int] = {}
        self._buffer_digest: dict[int, bytes] = {}

    def _digest_of(self, index: int) -> bytes:
        if index not in self._buffer_digest:
            self._buffer_digest[index] = _digest(self.buffers[index])
        return self._buffer_digest[index]

    def add_named_data(self, key: str, data: bytes | bytearray | memoryview | FileBackedData
                       | torch.Tensor, alignment: int | None = 1,
                       external_tag: str | None = None,
                       tensor_layout: TensorLayout | None = None) -> None:
        """Store ``data`` under ``key`` (in the ``.pte``, or in the external file
        ``external_tag``); ``alignment`` None means 1."""
        alignment = 1 if alignment is None else alignment
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
            raise NamedDataError(f"named data {key!r}: alignment must be a positive int, got "
                                 f"{alignment!r}")
        if isinstance(data, torch.Tensor):
            layout = tensor_layout_of(data)
            if tensor_layout is not None and tensor_layout != layout:
                raise NamedDataError(f"named data {key!r}: the tensor's layout is {layout}, not "
                                     f"the given {tensor_layout}; drop tensor_layout or fix it")
            tensor_layout, data = layout, _tensor_bytes(data)
        elif isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        elif not isinstance(data, (bytes, FileBackedData)):
            raise TypeError(f"named data {key!r}: bytes, FileBackedData or a torch.Tensor "
                            f"expected, got {type(data).__name__}")
        digest = _digest(data)
        table = self.pte_data if external_tag is None else self.external_data.setdefault(
            external_tag, {})
        index = self.key_to_buffer_idx.get(key)
        if index is not None:
            if self._digest_of(index) != digest:
                raise NamedDataError(
                    f"named data key {key!r} was already added with other bytes "
                    f"({len(self.buffers[index])} bytes then, {len(data)} now); use a unique "
                    "key per blob")
            if key in table:  # the same bytes again: keep both alignments
                table[key].alignment = math.lcm(table[key].alignment, alignment)
            return
        index = self._by_digest.get(digest)
        if index is None:
            index = len(self.buffers)
            self.buffers.append(data)
            self._by_digest[digest] = index
            self._buffer_digest[index] = digest
        self.key_to_buffer_idx[key] = index
        table[key] = DataEntry(index, alignment, tensor_layout)

    def externalize_pte_data(self, max_data_bytes: int, tag_prefix: str) -> None:
        """Move every key stored in the ``.pte`` to external files of at most
        ``max_data_bytes`` each, tagged ``{tag_prefix}_{sha256 of their sorted keys}``. Keys
        sharing a buffer stay together; shards are filled in sorted-key order, so the same
        contents always give the same files. On an error nothing changes."""
        if isinstance(max_data_bytes, bool) or not isinstance(max_data_bytes, int) \
                or max_data_bytes <= 0:
            raise NamedDataError(f"the external data shard cap must be a positive integer, got "
                                 f"{max_data_bytes!r}")
        if not tag_prefix:
            raise NamedDataError("the external data tag prefix must be nonempty")
        groups: dict[int, dict[str, DataEntry]] = {}
        for key, entry in self.pte_data.items():
            groups.setdefault(entry.buffer_index, {})[key] = entry
        shards: list[dict[str, DataEntry]] = []
        size = 0
        for index, entries in sorted(groups.items(), key=lambda g: sorted(g[1])):
            nbytes = len(self.buffers[index])
            if nbytes > max_data_bytes:
                raise NamedDataError(f"buffer {index} has {nbytes} bytes and exceeds "
                                     f"external data shard cap {max_data_bytes}")
            if not shards or size + nbytes > max_data_bytes:
                shards.append({})
                size = 0
            shards[-1].update(entries)
            size += nbytes
        external = {tag: dict(entries) for tag, entries in self.external_data.items()}
        for shard in shards:
            keys = sorted(shard)
            tag = f"{tag_prefix}_{hashlib.sha256(chr(0).join(keys).encode()).hexdigest()}"
            entries = {key: shard[key] for key in keys}
            if external.get(tag, entries) != entries:
                raise NamedDataError(f"external data tag collision for {tag}: the file already "
                                     "holds other keys; choose another tag prefix")
            external[tag] = entries
        self.external_data = external
        self.pte_data = {}

    def get_named_data_store_output(self) -> NamedDataStoreOutput:
        self.external_data = {tag: keys for tag, keys in self.external_data.items() if keys}
        return NamedDataStoreOutput(self.buffers, self.pte_data, self.external_data)

    def merge_named_data_store(self, other: NamedDataStoreOutput) -> None:
        """Add everything in ``other`` (another store's output) to this store."""
        for key, entry in other.pte_data.items():
            self.add_named_data(key, other.buffers[entry.buffer_index], entry.alignment, None,
                                entry.tensor_layout)
        for tag, keys in other.external_data.items():
            for key, entry in keys.items():
                self.add_named_data(key, other.buffers[entry.buffer_index], entry.alignment, tag,
                                    entry.tensor_layout)
