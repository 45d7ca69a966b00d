"""The .pte writer behind ``pte.serialize_pte``, and the ``eh00`` extended header.

Mirrors ExecuTorch 1.5.1's ``serialize_pte_binary`` (``exir/_serialize/_program.py``) step by
step, so that for the same program and data the output is byte-identical.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import struct
from dataclasses import dataclass
from typing import Any, cast

from ..errors import FormatError
from . import program as S
from .fbs import aligned, as_byte_view, check_alignment
from .flatbuffer import DEFAULT_DELEGATE_ALIGNMENT, program_to_flatbuffer

_HINT = "The file is truncated or corrupted; re-export it, or check that it was fully copied."


@dataclass(frozen=True)
class ExtendedHeader:
    """The ``eh00`` header inserted at byte 8 of a .pte that has segments."""

    MAGIC = b"eh00"
    LENGTH = 32  # what ExecuTorch writes
    MIN_LENGTH = 24  # files from before segment_data_size existed

    program_size: int  # bytes of the flatbuffer program, including this header
    segment_base_offset: int  # file offset of the first segment, 0 if none
    segment_data_size: int  # bytes of segment data, 0 if none (or an old file)
    length: int = LENGTH

    def to_bytes(self) -> bytes:
        return self.MAGIC + struct.pack(
            "<IQQQ",
            self.LENGTH,
            self.program_size,
            self.segment_base_offset,
            self.segment_data_size,
        )

    @classmethod
    def parse(cls, data: memoryview) -> ExtendedHeader | None:
        """The header at byte 8 of ``data``, or None when there is none (no ``eh00`` magic)."""
        if len(data) < 12 or bytes(data[8:12]) != cls.MAGIC:
            return None
        if len(data) < 8 + cls.MIN_LENGTH:
            raise FormatError(
                f".pte extended header is cut off: the file is only {len(data)} bytes. {_HINT}"
            )
        length, program_size, base = struct.unpack_from("<IQQ", data, 12)
        if length < cls.MIN_LENGTH:
            raise FormatError(
                f".pte extended header length is {length}, "
                f"less than the minimum {cls.MIN_LENGTH}. {_HINT}"
            )
        data_size = 0
        if length >= cls.LENGTH:
            if len(data) < 8 + cls.LENGTH:
                raise FormatError(
                    f".pte extended header is cut off: the file is only {len(data)} bytes. {_HINT}"
                )
            (data_size,) = struct.unpack_from("<Q", data, 32)
        return cls(program_size, base, data_size, length)


def _pack_subsegments(buffers: list, alignment: int | None) -> tuple[list, list[int]]:
    """Concatenate ``buffers``, padding all but the last to ``alignment``; return pieces, offsets.

    Mirrors ExecuTorch's ``_extract_constant_segment``: the last buffer gets no padding.
    """
    pieces: list = []
    offsets: list[int] = []
    offset = 0
    for i, buf in enumerate(buffers):
        pieces.append(buf)
        pad = (-len(buf)) % alignment if alignment else 0
        if i < len(buffers) - 1 and pad:
            pieces.append(bytes(pad))
        offsets.append(offset)
        offset += len(buf) + pad
    return pieces, offsets


def _content_key(data) -> tuple[int, bytes]:
    """A dedup key for a blob: equal content gives equal keys (no copy of the blob)."""
    return len(data), hashlib.sha256(data).digest()


def detach_program(program: S.Program) -> S.Program:
    """A copy of ``program`` whose segment-related fields and delegates can be changed freely."""
    plans = [
        dataclasses.replace(
            plan,
            delegates=[
                dataclasses.replace(d, processed=dataclasses.replace(d.processed))
                for d in plan.delegates
            ],
        )
        for plan in program.execution_plan
    ]
    return dataclasses.replace(
        program,
        execution_plan=plans,
        constant_buffer=list(program.constant_buffer),
        backend_delegate_data=list(program.backend_delegate_data),
        segments=list(program.segments),
    )


def _extract_delegate_segments(program: S.Program, segments: list) -> None:
    """Move non-empty inline delegate blobs into segments (identical blobs share one)."""
    remaining: list[S.BackendDelegateInlineData] = []
    seen: set[int] = set()
    segment_of: dict[tuple[int, bytes], int] = {}
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            ref = delegate.processed
            if ref.location != S.DataLocation.INLINE:
                raise FormatError(
                    f"delegate {delegate.id!r} already points at segment {ref.index}; pass "
                    "programs whose delegates are INLINE references into delegate_blobs."
                )
            if not 0 <= ref.index < len(program.backend_delegate_data):
                raise FormatError(
                    f"delegate {delegate.id!r} references blob {ref.index} but only "
                    f"{len(program.backend_delegate_data)} delegate blobs were given."
                )
            seen.add(ref.index)
            inline = program.backend_delegate_data[ref.index]
            if len(inline.data):
                key = _content_key(inline.data)
                index = segment_of.get(key)
                if index is None:
                    index = segment_of[key] = len(segments)
                    segments.append((inline.data, 1))
                delegate.processed = S.BackendDelegateDataReference(S.DataLocation.SEGMENT, index)
            else:
                delegate.processed = S.BackendDelegateDataReference(
                    S.DataLocation.INLINE, len(remaining)
                )
                remaining.append(inline)
    unused = set(range(len(program.backend_delegate_data))) - seen
    if unused:
        raise FormatError(
            f"delegate blobs {sorted(unused)} are not referenced by any delegate; drop them "
            "from delegate_blobs."
        )
    program.backend_delegate_data = remaining


def serialize_pte(
    program: S.Program,
    *,
    constant_buffers: list[bytes],
    delegate_blobs: list[bytes] | None,
    named_data: dict[str, tuple[bytes, int]] | None,
    extract_delegate_segments: bool = True,
    segment_alignment: int = 128,
    constant_tensor_alignment: int = 16,
    mutable_buffers: list[bytes] | None = None,
    delegate_alignment: int | None = None,
) -> bytes:
    """Write a complete .pte file, byte for byte as ExecuTorch 1.5.1's ``serialize_pte_binary``.

    * ``constant_buffers``: constant tensor data by ``Tensor.data_buffer_idx``; index 0 is the
      reserved empty placeholder (offset 0, size 0). They go into one constant segment, each
      padded to ``constant_tensor_alignment``; ``Program.constant_segment`` is set and
      ``Program.constant_buffer`` left empty. An empty list adds no constant segment. (For
      convenience a program may instead carry them in ``Program.constant_buffer``.)
    * ``delegate_blobs``: the processed blobs that the program's INLINE
      ``BackendDelegate.processed`` references index. With ``extract_delegate_segments`` the
      non-empty ones move to segments (identical blobs share one), else they stay inline.
    * ``named_data``: key -> (data, alignment); identical data shares one segment, aligned to
      lcm(segment_alignment, alignment of the first key that added it).
    * ``mutable_buffers``: initial data of mutable tensors, one unpadded segment.

    ``program`` is not modified. Raises ``FormatError`` on inconsistent inputs.
    """
    check_alignment(segment_alignment, "segment_alignment")
    check_alignment(constant_tensor_alignment, "constant_tensor_alignment")
    if delegate_alignment is None:
        delegate_alignment = DEFAULT_DELEGATE_ALIGNMENT
    check_alignment(delegate_alignment, "delegate_alignment")
    if program.segments:
        raise FormatError(
            f"the program already lists {len(program.segments)} segments; serialize_pte lays "
            "segments out itself. Use PteFile.to_serialize_args() to re-serialize a parsed file."
        )
    if program.constant_segment is not None and program.constant_segment.offsets:
        raise FormatError(
            "the program already has constant_segment offsets; pass the constants in "
            "constant_buffers and leave constant_segment empty (or use "
            "PteFile.to_serialize_args())."
        )
    program = detach_program(program)
    segments: list[tuple[Any, int]] = []  # (data, alignment)

    constants = [as_byte_view(c, f"constant_buffers[{i}]") for i, c in enumerate(constant_buffers)]
    if program.constant_buffer:
        if constants:
            raise FormatError(
                "constants were given both in Program.constant_buffer and in constant_buffers; "
                "pass them in constant_buffers only."
            )
        constants = [
            as_byte_view(b.storage, f"Program.constant_buffer[{i}]")
            for i, b in enumerate(program.constant_buffer)
        ]
    if constants and len(constants[0]):
        raise FormatError(
            f"constant_buffers[0] must be the empty placeholder (it backs non-constant tensors), "
            f"but it holds {len(constants[0])} bytes. Insert b'' at index 0."
        )
    pieces, offsets = _pack_subsegments(constants, constant_tensor_alignment)
    if offsets:
        program.constant_segment = S.SubsegmentOffsets(len(segments), offsets)
        program.constant_buffer = []
        segments.append((pieces, 1))

    if mutable_buffers is not None:
        pieces, offsets = _pack_subsegments(
            [as_byte_view(m, f"mutable_buffers[{i}]") for i, m in enumerate(mutable_buffers)], None
        )
        if sum(len(p) for p in pieces):
            program.mutable_data_segments = [S.SubsegmentOffsets(len(segments), offsets)]
            segments.append((pieces, 1))

    if delegate_blobs is not None:
        if program.backend_delegate_data:
            raise FormatError(
                "delegate blobs were given both in Program.backend_delegate_data and in "
                "delegate_blobs; pass them in delegate_blobs only."
            )
        program.backend_delegate_data = [
            S.BackendDelegateInlineData(cast(bytes, as_byte_view(b, f"delegate_blobs[{i}]")))
            for i, b in enumerate(delegate_blobs)
        ]
    if extract_delegate_segments:
        _extract_delegate_segments(program, segments)

    if named_data is not None:
        if program.named_data:
            raise FormatError(
                "the program already has named_data entries; pass them in named_data only."
            )
        entries: list[S.NamedData] = []
        segment_of: dict[tuple[int, bytes], int] = {}
        for key, (data, alignment) in named_data.items():
            if not isinstance(alignment, int) or alignment <= 0:
                raise FormatError(
                    f"named data {key!r} has alignment {alignment!r}; use a positive int."
                )
            view = as_byte_view(data, f"named data {key!r}")
            content = _content_key(view)
            index = segment_of.get(content)
            if index is None:
                index = segment_of[content] = len(segments)
                segments.append((view, alignment))
            entries.append(S.NamedData(key, index))
        program.named_data = entries

    # Lay out the segments back to back, each aligned, offsets relative to the first one.
    blobs: list = []
    end = 0
    for data, alignment in segments:
        parts = data if isinstance(data, list) else [data]
        size = sum(len(p) for p in parts)
        offset = aligned(end, math.lcm(segment_alignment, alignment))
        program.segments.append(S.DataSegment(offset, size))
        if offset > end:
            blobs.append(bytes(offset - end))
        blobs.extend(parts)
        end = offset + size

    flatbuffer = program_to_flatbuffer(
        program,
        constant_tensor_alignment=constant_tensor_alignment,
        delegate_alignment=delegate_alignment,
    )
    if end == 0:
        return flatbuffer

    max_alignment = max(constant_tensor_alignment, delegate_alignment)
    header_size = aligned(ExtendedHeader.LENGTH, max_alignment)
    program_size = header_size + len(flatbuffer)
    base = aligned(program_size, segment_alignment)
    header = ExtendedHeader(program_size, base, end).to_bytes()
    (root,) = struct.unpack_from("<I", flatbuffer, 0)
    return b"".join(
        [
            struct.pack("<I", root + header_size),
            flatbuffer[4:8],
            header,
            bytes(header_size - len(header)),
            memoryview(flatbuffer)[8:],
            bytes(base - program_size),
            *blobs,
        ]
    )
