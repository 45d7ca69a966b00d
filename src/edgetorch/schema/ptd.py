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
largest-first, and among fields of one size the last-declared first. ``FLAT_TENSOR`` declares
the schema with that write order (``fbs.FLATC``), so the bytes match flatc's.
"""

from __future__ import annotations

import hashlib
import math
import mmap
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ExternalDataError, FormatError
from .fbs import (
    FLATC,
    INT,
    STRING,
    UBYTE,
    UINT,
    ULONG,
    Enum,
    F,
    Schema,
    aligned,
    as_byte_view,
    check_alignment,
)
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

    @classmethod
    def from_tensor(cls, tensor: object) -> TensorLayout:
        """The layout of a dense torch tensor (ahead of time only: torch is imported here, so
        the runtime that reads layouts never needs it)."""
        from ..exir.tensor_layout import tensor_layout_of

        return tensor_layout_of(tensor)  # type: ignore[arg-type]


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


FLAT_TENSOR = Schema(
    "flat_tensor.fbs",
    FLATC,  # ExecuTorch writes .ptd flatbuffers with flatc from JSON
    {
        TensorLayout: [
            F("scalar_type", Enum(ScalarType)),
            F("sizes", [INT]),
            F("dim_order", [UBYTE]),
        ],
        NamedData: [
            F("key", STRING),
            F("segment_index", UINT),
            F("tensor_layout", TensorLayout),
        ],
        DataSegment: [F("offset", ULONG), F("size", ULONG)],
        FlatTensor: [
            F("version", UINT),
            F("segments", [DataSegment], required=True),
            F("named_data", [NamedData], required=True),
        ],
    },
)


def flat_tensor_to_flatbuffer(ft: FlatTensor) -> bytes:
    """Serialize a ``FlatTensor`` to flatbuffer bytes (identifier ``FT01``), laid out as flatc."""
    return FLAT_TENSOR.write(ft, identifier=FILE_IDENTIFIER)


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


def _check_layout(key: str, layout: TensorLayout) -> None:
    if any(d < 0 for d in layout.sizes):
        raise ExternalDataError(f".ptd tensor {key!r}: negative size in {layout.sizes}. {_HINT}")
    if len(layout.dim_order) != len(layout.sizes):
        raise ExternalDataError(
            f".ptd tensor {key!r}: dim_order has {len(layout.dim_order)} entries for "
            f"{len(layout.sizes)} dimensions. {_HINT}"
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
        ft = FLAT_TENSOR.read(
            view[:fb_end],
            FlatTensor,
            identifiers=(FILE_IDENTIFIER,),
            what=".ptd flatbuffer",
            hint=_HINT,
            error=ExternalDataError,
        )
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
            if layout is not None:
                _check_layout(nd.key, layout)
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
