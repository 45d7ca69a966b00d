"""The ``.ptd`` FlatTensor container: named tensors stored outside a .pte.

Layout (ExecuTorch 1.5.1, ``extension/flat_tensor/serialize/serialize.py`` and
``flat_tensor_header.cpp``)::

    [0:4]    root table offset
    [4:8]    file identifier "FT01"
    [8:48]   header "FH01": u32 length 40, u64 flatbuffer_offset, u64 flatbuffer_size,
             u64 segment_base_offset, u64 segment_data_size (padded to 16 bytes)
    [48:..]  rest of the FlatTensor flatbuffer
    [..]     zero padding up to segment_base_offset, then the segments

ExecuTorch writes the FlatTensor flatbuffer with ``flatc`` from JSON rather than with the
Python object API, and flatc lays tables out differently: within a table it adds fields
largest-first, and among fields of one size the last-declared first. The writer below drives
``flatbuffers.Builder`` in that order so the bytes match flatc's.
"""

from __future__ import annotations

import hashlib
import math
import mmap
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import flatbuffers

from ..errors import ExternalDataError, FormatError
from ._fbreader import I8, U32, U64, FbReader, Table
from ._fbwriter import aligned, as_byte_view, check_alignment, scalar_vector, table_vector
from .program import DataSegment
from .scalar_type import ELEMENT_SIZE, ScalarType

FILE_IDENTIFIER = b"FT01"
VERSION = 0  # newest FlatTensor schema version this reader understands
_MAGIC_RE = re.compile(rb"FT[0-9a-zA-Z]{2}")
_FLATBUFFER_ALIGNMENT = 16
_HINT = "The .ptd file is truncated or corrupted; re-export it together with its .pte."


@dataclass
class TensorLayout:
    """``flat_tensor.fbs`` TensorLayout: dtype, sizes and dim order of a stored tensor."""

    scalar_type: ScalarType
    sizes: list[int]
    dim_order: list[int]

    @property
    def nbytes(self) -> int:
        return math.prod(self.sizes) * ELEMENT_SIZE[self.scalar_type]


@dataclass
class NamedData:
    """``flat_tensor.fbs`` NamedData: a key, its segment, and (for tensors) its layout."""

    key: str
    segment_index: int
    tensor_layout: TensorLayout | None = None


@dataclass
class FlatTensor:
    """``flat_tensor.fbs`` root table. ``DataSegment`` is shared with program.fbs (same fields)."""

    version: int = VERSION
    segments: list[DataSegment] = field(default_factory=list)
    named_data: list[NamedData] = field(default_factory=list)


@dataclass(frozen=True)
class FlatTensorHeader:
    """The ``FH01`` header at byte 8 of a .ptd file."""

    MAGIC = b"FH01"
    LENGTH = 40

    flatbuffer_offset: int
    flatbuffer_size: int
    segment_base_offset: int
    segment_data_size: int
    length: int = LENGTH

    def to_bytes(self) -> bytes:
        return self.MAGIC + struct.pack(
            "<IQQQQ",
            self.LENGTH,
            self.flatbuffer_offset,
            self.flatbuffer_size,
            self.segment_base_offset,
            self.segment_data_size,
        )


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------


def _write_layout(b: flatbuffers.Builder, layout: TensorLayout) -> int:
    sizes = scalar_vector(b, "i", 4, layout.sizes, "TensorLayout.sizes")
    dim_order = scalar_vector(b, "B", 1, layout.dim_order, "TensorLayout.dim_order")
    b.StartObject(3)
    b.PrependUOffsetTRelativeSlot(2, dim_order, 0)
    b.PrependUOffsetTRelativeSlot(1, sizes, 0)
    b.PrependInt8Slot(0, int(layout.scalar_type), 0)
    return b.EndObject()


def _write_named_data(b: flatbuffers.Builder, nd: NamedData) -> int:
    key = b.CreateString(nd.key)
    layout = None if nd.tensor_layout is None else _write_layout(b, nd.tensor_layout)
    b.StartObject(3)
    if layout is not None:
        b.PrependUOffsetTRelativeSlot(2, layout, 0)
    b.PrependUint32Slot(1, nd.segment_index, 0)
    b.PrependUOffsetTRelativeSlot(0, key, 0)
    return b.EndObject()


def _write_segment(b: flatbuffers.Builder, seg: DataSegment) -> int:
    b.StartObject(2)
    b.PrependUint64Slot(1, seg.size, 0)
    b.PrependUint64Slot(0, seg.offset, 0)
    return b.EndObject()


def flat_tensor_to_flatbuffer(ft: FlatTensor) -> bytes:
    """Serialize a ``FlatTensor`` to flatbuffer bytes (identifier ``FT01``), laid out as flatc."""
    b = flatbuffers.Builder(1024)
    segments = table_vector(b, [_write_segment(b, seg) for seg in ft.segments])
    named = table_vector(b, [_write_named_data(b, nd) for nd in ft.named_data])
    b.StartObject(3)
    b.PrependUOffsetTRelativeSlot(2, named, 0)
    b.PrependUOffsetTRelativeSlot(1, segments, 0)
    b.PrependUint32Slot(0, ft.version, 0)
    b.Finish(b.EndObject(), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def serialize_ptd(
    named_tensors: dict[str, Sequence],
    *,
    alignment: int = 1,
    segment_alignment: int = 128,
) -> bytes:
    """Write a .ptd file, byte for byte as ExecuTorch 1.5.1's ``FlatTensorSerializer``.

    Each value is ``(data, scalar_type, sizes, dim_order)``, optionally followed by a per-key
    alignment that overrides ``alignment``; ``scalar_type=None`` stores an opaque blob without
    a tensor layout. Identical data under several keys is stored once (as ExecuTorch's
    NamedDataStore does), aligned to lcm(segment_alignment, alignment of its first key).
    """
    check_alignment(segment_alignment, "segment_alignment")
    named: list[NamedData] = []
    segments: list[DataSegment] = []
    blobs: list = []
    segment_of: dict[tuple[int, bytes], int] = {}
    end = 0
    for key, value in named_tensors.items():
        data, scalar_type, sizes, dim_order = value[:4]
        align = value[4] if len(value) > 4 else alignment
        if not isinstance(align, int) or align <= 0:
            raise ExternalDataError(
                f"named tensor {key!r}: alignment {align!r} must be a positive int."
            )
        view = as_byte_view(data, f"named tensor {key!r}", ExternalDataError)
        content = (len(view), hashlib.sha256(view).digest())
        index = segment_of.get(content)
        if index is None:
            index = segment_of[content] = len(segments)
            offset = aligned(end, math.lcm(segment_alignment, align))
            segments.append(DataSegment(offset, len(view)))
            if offset > end:
                blobs.append(bytes(offset - end))
            blobs.append(view)
            end = offset + len(view)
        layout = None
        if scalar_type is not None:
            try:
                layout = TensorLayout(ScalarType(scalar_type), list(sizes), list(dim_order))
            except (TypeError, ValueError) as e:
                raise ExternalDataError(
                    f"named tensor {key!r}: invalid layout ({e}). Give a ScalarType and lists "
                    "of sizes and dim_order."
                ) from None
        named.append(NamedData(key, index, layout))

    try:
        flatbuffer = flat_tensor_to_flatbuffer(FlatTensor(VERSION, segments, named))
    except FormatError as e:
        raise ExternalDataError(str(e)) from None
    header_size = aligned(FlatTensorHeader.LENGTH, _FLATBUFFER_ALIGNMENT)
    base = aligned(len(flatbuffer) + header_size, segment_alignment)
    header = FlatTensorHeader(header_size, len(flatbuffer), base, end).to_bytes()
    (root,) = struct.unpack_from("<I", flatbuffer, 0)
    return b"".join(
        [
            struct.pack("<I", root + header_size),
            flatbuffer[4:8],
            header,
            bytes(header_size - len(header)),
            memoryview(flatbuffer)[8:],
            bytes(base - len(flatbuffer) - header_size),
            *blobs,
        ]
    )


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------


def _read_layout(t: Table) -> TensorLayout:
    code = t.scalar(0, I8, 0, "scalar_type")
    try:
        scalar_type = ScalarType(code)
    except ValueError:
        t.fail("scalar_type", f"{code} is not a valid ScalarType")
    sizes = t.scalars(1, "i", 4, "sizes") or []
    dim_order = t.scalars(2, "B", 1, "dim_order") or []
    if any(d < 0 for d in sizes):
        t.fail("sizes", f"negative size in {sizes}")
    if len(dim_order) != len(sizes):
        t.fail("dim_order", f"has {len(dim_order)} entries for {len(sizes)} dimensions")
    return TensorLayout(scalar_type, sizes, dim_order)


def _read_flat_tensor(t: Table) -> FlatTensor:
    version = t.scalar(0, U32, 0, "version")
    segments = t.tables(1, "segments")
    named = t.tables(2, "named_data")
    if segments is None:
        t.fail("segments", "missing (the runtime requires it)")
    if named is None:
        t.fail("named_data", "missing (the runtime requires it)")
    return FlatTensor(
        version,
        [DataSegment(s.scalar(0, U64, 0, "offset"), s.scalar(1, U64, 0, "size")) for s in segments],
        [
            NamedData(
                n.string(0, "key") or "",
                n.scalar(1, U32, 0, "segment_index"),
                None if (lt := n.table(2, "tensor_layout")) is None else _read_layout(lt),
            )
            for n in named
        ],
    )


@dataclass
class PtdFile:
    """A parsed .ptd file; ``get`` returns zero-copy, bounds-checked slices of ``data``."""

    data: memoryview
    header: FlatTensorHeader
    flat_tensor: FlatTensor
    _index: dict[str, NamedData] = field(repr=False, default_factory=dict)

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview | mmap.mmap) -> PtdFile:
        """Parse and validate a whole .ptd file; raises ``ExternalDataError`` on any problem."""
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        size = len(view)
        if size < 8 + FlatTensorHeader.LENGTH:
            raise ExternalDataError(f"not a .ptd file: only {size} bytes. {_HINT}")
        ident = bytes(view[4:8])
        if not _MAGIC_RE.fullmatch(ident):
            raise ExternalDataError(
                f"not a .ptd file: bytes 4..8 are {ident!r}, expected 'FT' and two letters or "
                "digits (e.g. b'FT01'). Check that this is an ExecuTorch data file."
            )
        if ident != FILE_IDENTIFIER:
            raise ExternalDataError(
                f"unsupported .ptd version {ident!r}; this reader supports {FILE_IDENTIFIER!r}. "
                "Re-export the data with a matching exporter."
            )
        if bytes(view[8:12]) != FlatTensorHeader.MAGIC:
            raise ExternalDataError(
                f".ptd header magic is {bytes(view[8:12])!r}, "
                f"expected {FlatTensorHeader.MAGIC!r}. {_HINT}"
            )
        length, fb_offset, fb_size, base, data_size = struct.unpack_from("<IQQQQ", view, 12)
        header = FlatTensorHeader(fb_offset, fb_size, base, data_size, length)
        if length < FlatTensorHeader.LENGTH:
            raise ExternalDataError(
                f".ptd header length {length} is less than {FlatTensorHeader.LENGTH}. {_HINT}"
            )
        fb_end = fb_offset + fb_size
        if fb_offset < 8 + length or fb_end > size:
            raise ExternalDataError(
                f".ptd header places the flatbuffer at [{fb_offset}, {fb_end}), outside the "
                f"{size}-byte file or inside the header. {_HINT}"
            )
        if base + data_size > size or (data_size and base < fb_end - 8):
            raise ExternalDataError(
                f".ptd header places segment data at [{base}, {base + data_size}), but the file "
                f"is {size} bytes and the flatbuffer ends at {fb_end}. {_HINT}"
            )
        reader = FbReader(
            view[:fb_end], what=".ptd flatbuffer", hint=_HINT, error=ExternalDataError
        )
        ft = _read_flat_tensor(reader.root("FlatTensor"))
        if ft.version > VERSION:
            raise ExternalDataError(
                f".ptd schema version {ft.version} is newer than this reader supports "
                f"({VERSION}). Use a matching edgetorch/ExecuTorch version."
            )
        ptd = cls(view, header, ft)
        ptd._validate()
        return ptd

    def _validate(self) -> None:
        ft = self.flat_tensor
        for i, seg in enumerate(ft.segments):
            if seg.offset + seg.size > self.header.segment_data_size:
                raise ExternalDataError(
                    f".ptd segment {i} (offset {seg.offset}, {seg.size} bytes) ends past the "
                    f"{self.header.segment_data_size} bytes of segment data. {_HINT}"
                )
        for nd in ft.named_data:
            if nd.key in self._index:
                raise ExternalDataError(f".ptd lists key {nd.key!r} twice. {_HINT}")
            if nd.segment_index >= len(ft.segments):
                raise ExternalDataError(
                    f".ptd key {nd.key!r} references segment {nd.segment_index}, but there are "
                    f"{len(ft.segments)}. {_HINT}"
                )
            layout = nd.tensor_layout
            seg_size = ft.segments[nd.segment_index].size
            if layout is not None and layout.nbytes > seg_size:
                raise ExternalDataError(
                    f".ptd tensor {nd.key!r} ({layout.scalar_type.name}{layout.sizes}) needs "
                    f"{layout.nbytes} bytes but its segment holds {seg_size}. {_HINT}"
                )
            self._index[nd.key] = nd

    def keys(self) -> list[str]:
        """Keys in file order."""
        return list(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def get(self, key: str) -> tuple[memoryview, TensorLayout | None]:
        """(data, layout) of ``key``: its whole segment (as the C++ runtime returns) and layout."""
        nd = self._index.get(key)
        if nd is None:
            keys = self.keys()
            raise ExternalDataError(
                f".ptd has no key {key!r}; it has {len(keys)} keys"
                + (f" (e.g. {keys[:5]})" if keys else "")
                + ". Check that the .ptd belongs to this .pte."
            )
        seg = self.flat_tensor.segments[nd.segment_index]
        start = self.header.segment_base_offset + seg.offset
        return self.data[start : start + seg.size], nd.tensor_layout
