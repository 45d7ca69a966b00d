"""The ``.pte`` container: flatbuffer program, extended header ``eh00`` and data segments.

Layout (ExecuTorch 1.5.1, ``exir/_serialize/_program.py`` and ``schema/extended_header.cpp``)::

    [0:4]   root table offset          \\
    [4:8]   file identifier "ET12"      |  program flatbuffer, with the extended header
    [8:40]  extended header "eh00"      |  inserted after the 8-byte prefix and padded to
    [..]    flatbuffer tables           /  the schema's largest force_align (16)
    [..]    zero padding up to segment_base_offset (a multiple of segment_alignment)
    [..]    segments, each at a multiple of lcm(segment_alignment, its own alignment)

Segments are appended in ExecuTorch's order: the constant segment, the mutable-data segment,
extracted delegate blobs, then named data. A program without segments has no extended header.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError
from . import program as S
from ._pte_writer import ExtendedHeader, detach_program, serialize_pte
from .flatbuffer import program_from_flatbuffer

__all__ = ["ExtendedHeader", "PteFile", "serialize_pte"]

_MAGIC_RE = re.compile(rb"ET[0-9a-zA-Z]{2}")
_HINT = "The file is truncated or corrupted; re-export it, or check that it was fully copied."


@dataclass
class PteFile:
    """A parsed .pte file. Accessors return zero-copy, bounds-checked slices of ``data``."""

    data: memoryview
    program: S.Program
    header: ExtendedHeader | None
    program_size: int  # bytes of the flatbuffer part (the whole file without a header)
    segment_base: int  # file offset of segment data, 0 without segments
    segment_region: int  # bytes available for segment data after segment_base

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview | mmap.mmap, *,
              check_version: bool = True) -> PteFile:
        """Parse and validate a whole .pte file (every offset is checked; nothing is copied).
        ``check_version=False`` reads a program of another schema version too (for tools that
        describe files, such as ``diff_pte``; the runtime never passes it)."""
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        size = len(view)
        if size < 8:
            raise FormatError(
                f"not a .pte file: only {size} bytes (at least 8 are needed). {_HINT}"
            )
        magic = bytes(view[4:8])
        if not _MAGIC_RE.fullmatch(magic):
            raise FormatError(
                f"not a .pte file: bytes 4..8 are {magic!r}, expected 'ET' and two letters or "
                "digits (e.g. b'ET12'). Check that this is an ExecuTorch program file."
            )
        if magic != S.FILE_IDENTIFIER:
            raise FormatError(
                f"unsupported .pte version {magic!r}: this reader supports {S.FILE_IDENTIFIER!r} "
                "(ExecuTorch 1.x). Re-export the model with a matching exporter."
            )
        header = ExtendedHeader.parse(view)
        if header is None:
            program_size, base, region = size, 0, 0
        else:
            program_size, base = header.program_size, header.segment_base_offset
            if not 8 + header.length <= program_size <= size:
                raise FormatError(
                    f".pte extended header says the program is {program_size} bytes, but the "
                    f"file is {size} bytes (and the header alone {8 + header.length}). {_HINT}"
                )
            if base and not program_size <= base <= size:
                raise FormatError(
                    f".pte segment base offset {base} is outside [{program_size}, {size}] "
                    f"(program end .. file end). {_HINT}"
                )
            if not base and header.segment_data_size:
                # Segment offsets would be taken from byte 0: constants would read the
                # flatbuffer's bytes instead of their own (garbage, often NaN).
                raise FormatError(
                    f".pte segment base offset is 0, but the header says there are "
                    f"{header.segment_data_size} bytes of segment data; segment data must start "
                    f"at or after the end of the program ({program_size}). {_HINT}"
                )
            if header.segment_data_size and base + header.segment_data_size > size:
                raise FormatError(
                    f".pte is truncated: the header says segment data ends at byte "
                    f"{base + header.segment_data_size}, but the file is {size} bytes. {_HINT}"
                )
            region = header.segment_data_size or (size - base if base else 0)
        program = program_from_flatbuffer(view[:program_size])
        pte = cls(view, program, header, program_size, base, region)
        pte._validate(check_version)
        return pte

    def _validate(self, check_version: bool = True) -> None:
        p = self.program
        if check_version and p.version != S.SCHEMA_VERSION:
            raise FormatError(
                f".pte program schema version {p.version} is not supported: this reader (as "
                f"ExecuTorch 1.5) reads version {S.SCHEMA_VERSION}. {_HINT}")
        if self.header is not None and not self.segment_base and any(g.size for g in p.segments):
            raise FormatError(
                f".pte segment base offset is 0, but the program lists {len(p.segments)} "
                f"segments with data; segment data must start at or after the end of the "
                f"program ({self.program_size}). {_HINT}"
            )
        for i, seg in enumerate(p.segments):
            if seg.offset + seg.size > self.segment_region:
                where = (
                    "the file has no extended header, so no segment data"
                    if self.header is None
                    else f"the file has {self.segment_region} bytes of segment data"
                )
                raise FormatError(
                    f".pte segment {i} (offset {seg.offset}, {seg.size} bytes) ends past the "
                    f"segment data: {where}. {_HINT}"
                )
        if p.constant_buffer and p.constant_segment and len(p.constant_segment.offsets) > 1:
            # The runtime refuses this too: constants must live in exactly one place.
            raise FormatError(
                f".pte has {len(p.constant_buffer)} inline constant buffers and a constant "
                f"segment with {len(p.constant_segment.offsets)} offsets; only one may be used. "
                f"{_HINT}"
            )
        subsegments = [("constant_segment", p.constant_segment)] if p.constant_segment else []
        subsegments += [
            (f"mutable_data_segments[{i}]", m) for i, m in enumerate(p.mutable_data_segments or [])
        ]
        for name, sub in subsegments:
            if not sub.offsets:
                continue
            seg_size = self._segment(sub.segment_index, name).size
            bad = [o for o in sub.offsets if o > seg_size]
            if bad:
                raise FormatError(
                    f".pte {name}: offset {bad[0]} is past the end of its {seg_size}-byte "
                    f"segment {sub.segment_index}. {_HINT}"
                )
        for plan in p.execution_plan:
            for d in plan.delegates:
                ref = d.processed
                if ref.location == S.DataLocation.SEGMENT:
                    self._segment(ref.index, f"delegate {d.id!r} of plan {plan.name!r}")
                elif ref.index >= len(p.backend_delegate_data):
                    raise FormatError(
                        f".pte delegate {d.id!r} of plan {plan.name!r} references inline blob "
                        f"{ref.index}, but there are {len(p.backend_delegate_data)}. {_HINT}"
                    )
        for nd in p.named_data or []:
            self._segment(nd.segment_index, f"named data {nd.key!r}")

    def _segment(self, index: int, user: str) -> S.DataSegment:
        if not 0 <= index < len(self.program.segments):
            raise FormatError(
                f".pte {user} references segment {index}, but the file has "
                f"{len(self.program.segments)} segments. {_HINT}"
            )
        return self.program.segments[index]

    def segment_bytes(self, index: int) -> memoryview:
        """The bytes of ``Program.segments[index]``."""
        seg = self._segment(index, "a caller")
        start = self.segment_base + seg.offset
        return self.data[start : start + seg.size]

    def _subsegment(
        self, sub: S.SubsegmentOffsets, idx: int, nbytes: int | None, what: str
    ) -> memoryview:
        if not 0 <= idx < len(sub.offsets):
            raise FormatError(f".pte has no {what} {idx}: there are {len(sub.offsets)}. {_HINT}")
        segment = self.segment_bytes(sub.segment_index)
        start = sub.offsets[idx]
        nxt = sub.offsets[idx + 1] if idx + 1 < len(sub.offsets) else len(segment)
        end = nxt if nxt >= start else len(segment)
        if nbytes is not None:
            if start + nbytes > len(segment):
                raise FormatError(
                    f".pte {what} {idx} needs {nbytes} bytes at offset {start}, past the end of "
                    f"its {len(segment)}-byte segment. {_HINT}"
                )
            end = start + nbytes
        return segment[start:end]

    def constant_bytes(self, data_buffer_idx: int, nbytes: int | None = None) -> memoryview:
        """Data of constant ``data_buffer_idx`` (constant segment or legacy ``constant_buffer``).

        Without ``nbytes`` the slice runs to the next constant (so it may include alignment
        padding); with ``nbytes`` it is exactly that long, checked against the segment.
        """
        p = self.program
        if p.constant_segment is not None and p.constant_segment.offsets:
            return self._subsegment(p.constant_segment, data_buffer_idx, nbytes, "constant buffer")
        if not 0 <= data_buffer_idx < len(p.constant_buffer):
            raise FormatError(
                f".pte has no constant buffer {data_buffer_idx}: there are "
                f"{len(p.constant_buffer)}. {_HINT}"
            )
        storage = memoryview(p.constant_buffer[data_buffer_idx].storage)
        if nbytes is not None:
            if nbytes > len(storage):
                raise FormatError(
                    f".pte constant buffer {data_buffer_idx} holds {len(storage)} bytes, "
                    f"{nbytes} are needed. {_HINT}"
                )
            storage = storage[:nbytes]
        return storage

    def mutable_bytes(
        self, data_buffer_idx: int, mutable_segment_idx: int = 0, nbytes: int | None = None
    ) -> memoryview:
        """Initial data of a mutable tensor, from ``mutable_data_segments[mutable_segment_idx]``."""
        subs = self.program.mutable_data_segments or []
        if not 0 <= mutable_segment_idx < len(subs):
            raise FormatError(
                f".pte has no mutable data segment {mutable_segment_idx}: "
                f"there are {len(subs)}. {_HINT}"
            )
        return self._subsegment(
            subs[mutable_segment_idx], data_buffer_idx, nbytes, "mutable buffer"
        )

    def delegate_bytes(self, delegate: S.BackendDelegate) -> memoryview:
        """The processed blob of ``delegate``, inline or in a segment."""
        ref = delegate.processed
        if ref.location == S.DataLocation.SEGMENT:
            return self.segment_bytes(ref.index)
        inline = self.program.backend_delegate_data
        if not 0 <= ref.index < len(inline):
            raise FormatError(
                f".pte delegate {delegate.id!r} references missing inline blob {ref.index}. {_HINT}"
            )
        return memoryview(inline[ref.index].data)

    def named_data_keys(self) -> list[str]:
        return [nd.key for nd in self.program.named_data or []]

    def named_data(self, key: str) -> memoryview:
        """The blob stored under ``key`` in ``Program.named_data``."""
        for nd in self.program.named_data or []:
            if nd.key == key:
                return self.segment_bytes(nd.segment_index)
        keys = self.named_data_keys()
        raise FormatError(
            f".pte has no named data {key!r}; it has {len(keys)} keys"
            + (f" (e.g. {keys[:5]})" if keys else "")
            + ". Check the key or the .ptd file."
        )

    def size_breakdown(self) -> dict[str, int]:
        """Bytes per section; every entry except ``total`` adds up to ``total``.

        ``header`` is the 8-byte flatbuffer prefix plus the extended header, ``program`` the
        rest of the flatbuffer (including any constants or delegate blobs stored inline),
        then the segment kinds, ``other_segments`` for unreferenced segments and ``padding``.
        """
        p = self.program
        header = 8 + (self.header.length if self.header else 0)
        out = {"header": header, "program": self.program_size - header}
        counted: set[int] = set()

        def add(name: str, indices) -> None:
            fresh = {i for i in indices if i not in counted}
            counted.update(fresh)
            out[name] = sum(p.segments[i].size for i in fresh)

        add(
            "constant_segment",
            [p.constant_segment.segment_index]
            if p.constant_segment and p.constant_segment.offsets
            else [],
        )
        add("mutable_data", [m.segment_index for m in p.mutable_data_segments or []])
        add(
            "delegate_segments",
            [
                d.processed.index
                for plan in p.execution_plan
                for d in plan.delegates
                if d.processed.location == S.DataLocation.SEGMENT
            ],
        )
        add("named_data", [nd.segment_index for nd in p.named_data or []])
        add("other_segments", range(len(p.segments)))
        out["padding"] = len(self.data) - sum(out.values())
        out["total"] = len(self.data)
        return out

    def to_serialize_args(self) -> dict[str, Any]:
        """Keyword arguments for ``serialize_pte`` that rebuild this file.

        Mirrors ExecuTorch's ``_restore_segments``: segment data moves back into the
        ``constant_buffers`` / ``mutable_buffers`` / ``delegate_blobs`` / ``named_data``
        arguments and ``Program.segments`` is cleared. Alignments are not stored in a .pte, so
        the defaults are assumed (named data alignment 1). Blobs are zero-copy slices.
        """
        p = self.program
        program = detach_program(p)
        program.segments = []
        args: dict[str, Any] = {"constant_buffers": [], "mutable_buffers": None}

        if p.constant_segment is not None and p.constant_segment.offsets:
            c = p.constant_segment
            args["constant_buffers"] = [
                self._subsegment(c, i, None, "constant buffer") for i in range(len(c.offsets))
            ]
            program.constant_segment = S.SubsegmentOffsets(0, [])
        if p.mutable_data_segments:
            if len(p.mutable_data_segments) > 1:
                raise FormatError(
                    f".pte has {len(p.mutable_data_segments)} mutable data segments; "
                    "serialize_pte writes at most one."
                )
            m = p.mutable_data_segments[0]
            args["mutable_buffers"] = [
                self._subsegment(m, i, None, "mutable buffer") for i in range(len(m.offsets))
            ]
            program.mutable_data_segments = None

        blobs: list[bytes | memoryview] = [d.data for d in p.backend_delegate_data]
        extracted = False
        for plan in program.execution_plan:
            for d in plan.delegates:
                if d.processed.location == S.DataLocation.SEGMENT:
                    extracted = True
                    blobs.append(self.segment_bytes(d.processed.index))
                    d.processed = S.BackendDelegateDataReference(
                        S.DataLocation.INLINE, len(blobs) - 1
                    )
        program.backend_delegate_data = []
        args["delegate_blobs"] = blobs
        # Inline blobs that are non-empty mean the file was written without extraction.
        args["extract_delegate_segments"] = extracted or not any(
            len(b.data) for b in p.backend_delegate_data
        )

        args["named_data"] = None
        if p.named_data:
            args["named_data"] = {
                nd.key: (self.segment_bytes(nd.segment_index), 1) for nd in p.named_data
            }
            program.named_data = None
        args["program"] = program
        return args
