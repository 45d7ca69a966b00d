"""What a named-data serializer takes and gives (ExecuTorch's ``data_serializer``):
``DataEntry`` (where a key's bytes are), ``DataPayload`` (unique buffers + keys) and the
``DataSerializer`` interface a file format implements (``.ptd``: ``FlatTensorSerializer``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from ...schema.ptd import TensorLayout
from ._cord import Cord, CordBuffer


@dataclass
class DataEntry:
    """Key ``k``'s bytes are ``buffers[buffer_index]``, aligned to ``alignment``; a tensor's
    entry also carries its layout."""

    buffer_index: int
    alignment: int
    tensor_layout: TensorLayout | None = None


@dataclass
class DataPayload:
    """Unique buffers and the keys pointing into them (several keys may share a buffer)."""

    buffers: Sequence[CordBuffer]
    named_data: dict[str, DataEntry]


class DataSerializer(ABC):
    """A file format for named data: ``serialize(payload) -> Cord`` and its inverse."""

    @abstractmethod
    def serialize(self, data: DataPayload) -> Cord:
        """The file's bytes for ``data``."""

    @abstractmethod
    def deserialize(self, blob: Cord) -> DataPayload:
        """The payload ``serialize`` wrote into ``blob``."""
