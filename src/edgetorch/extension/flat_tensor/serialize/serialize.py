"""``FlatTensorSerializer``: the ``DataSerializer`` that writes and reads ``.ptd`` files
(ExecuTorch's ``extension.flat_tensor.serialize.serialize``). The format code is edgetorch's
``schema.ptd``; this module converts between it and ``DataPayload``."""

from __future__ import annotations

from dataclasses import dataclass

from ....exir._serialize._cord import Cord
from ....exir._serialize._named_data_store import NamedDataStoreOutput, buffer_bytes
from ....exir._serialize.data_serializer import DataEntry, DataPayload, DataSerializer
from ....schema.ptd import PtdFile, serialize_ptd


@dataclass
class FlatTensorConfig:
    """Every segment starts at a multiple of ``segment_alignment`` (and of its own key's
    alignment)."""

    segment_alignment: int = 128


class FlatTensorSerializer(DataSerializer):
    def __init__(self, config: FlatTensorConfig | None = None) -> None:
        self.config = config if config is not None else FlatTensorConfig()

    def serialize(self, data: DataPayload) -> Cord:
        """A ``.ptd`` holding every key of ``data`` (keys sharing a buffer share a segment)."""
        named = {}
        for key, entry in data.named_data.items():
            layout = entry.tensor_layout
            blob = buffer_bytes(data.buffers[entry.buffer_index])
            if layout is None:
                named[key] = (blob, None, [], [], entry.alignment)
            else:
                named[key] = (blob, layout.scalar_type, layout.sizes, layout.dim_order,
                              entry.alignment)
        return Cord(serialize_ptd(named, segment_alignment=self.config.segment_alignment))

    def deserialize(self, blob: Cord) -> DataPayload:
        """The keys and segments of a ``.ptd`` (alignments are not stored: they read as 1).
        A malformed file raises ``ExternalDataError``."""
        ptd = PtdFile.parse(bytes(blob))
        base = ptd.header.segment_base_offset  # parse checked every segment lies in the file
        buffers = [bytes(ptd.data[base + seg.offset:base + seg.offset + seg.size])
                   for seg in ptd.flat_tensor.segments]
        named = {nd.key: DataEntry(nd.segment_index, 1, nd.tensor_layout)
                 for nd in ptd.flat_tensor.named_data}
        return DataPayload(buffers=buffers, named_data=named)

    def deserialize_to_named_data_store_output(self, blob: bytes,
                                               name: str) -> NamedDataStoreOutput:
        """The ``.ptd``'s keys as a store output whose external file is ``name``."""
        payload = self.deserialize(Cord(blob))
        return NamedDataStoreOutput(list(payload.buffers), {}, {name: payload.named_data})
