"""A ``.pte`` file as ExecuTorch's serializer internals see it (``exir._serialize._program``):
``PTEFile`` (the program with its segments moved back in), ``deserialize_pte_binary`` and
``serialize_pte_binary``, the extended header (``_ExtendedHeader``) and a program as JSON. The format code is edgetorch's (``edgetorch.schema.pte``); this
module only converts between its arguments and ExecuTorch's ``PTEFile`` shape.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import struct
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from ...schema import program as S
from ...schema._pte_writer import ExtendedHeader
from ...schema.pte import PteFile, serialize_pte
from ._named_data_store import NamedDataStoreOutput, buffer_bytes
from .data_serializer import DataEntry


@dataclass
class PTEFile:
    """A program whose constants and delegate blobs are inline (``constant_buffer``,
    ``backend_delegate_data``), the initial data of its mutable buffers, and its named data."""

    program: S.Program
    mutable_data: list[S.Buffer] | None = None
    named_data: NamedDataStoreOutput | None = None


def deserialize_pte_binary(program_data: bytes, *, check_version: bool = True) -> PTEFile:
    """Parse a ``.pte`` file; segment data goes back into the program as ExecuTorch's
    ``_restore_segments`` puts it (constants into ``constant_buffer``, delegate blobs inline).
    ``check_version=False`` also reads other schema versions (see ``PteFile.parse``)."""
    args = PteFile.parse(program_data, check_version=check_version).to_serialize_args()
    program: S.Program = args["program"]
    if args["constant_buffers"]:
        program.constant_buffer = [S.Buffer(bytes(b)) for b in args["constant_buffers"]]
    program.backend_delegate_data = [S.BackendDelegateInlineData(bytes(b))
                                     for b in args["delegate_blobs"]]
    mutable = None
    if args["mutable_buffers"] is not None:
        mutable = [S.Buffer(bytes(b)) for b in args["mutable_buffers"]]
    named = None
    if args["named_data"]:
        named = NamedDataStoreOutput()
        for key, (data, alignment) in args["named_data"].items():
            named.pte_data[key] = DataEntry(len(named.buffers), alignment)
            named.buffers.append(bytes(data))
    return PTEFile(program=program, mutable_data=mutable, named_data=named)


def serialize_pte_binary(pte_file: PTEFile, *, extract_delegate_segments: bool = False,
                         segment_alignment: int = 128,
                         constant_tensor_alignment: int | None = None,
                         delegate_alignment: int | None = None) -> bytes:
    """The bytes of ``pte_file`` (ExecuTorch's defaults: delegate blobs stay inline unless
    ``extract_delegate_segments``; constants go to a constant segment)."""
    # serialize_pte takes constants and blobs as arguments, not inside the program.
    program = S.Program(**{**vars(pte_file.program), "constant_buffer": [],
                           "backend_delegate_data": []})
    constants = [b.storage for b in pte_file.program.constant_buffer]
    blobs = [d.data for d in pte_file.program.backend_delegate_data]
    named = None
    if pte_file.named_data is not None:
        named = {key: (buffer_bytes(pte_file.named_data.buffers[e.buffer_index]), e.alignment)
                 for key, e in pte_file.named_data.pte_data.items()}
    return serialize_pte(
        program, constant_buffers=constants, delegate_blobs=blobs, named_data=named,
        extract_delegate_segments=extract_delegate_segments,
        segment_alignment=segment_alignment,
        constant_tensor_alignment=constant_tensor_alignment or 16,
        mutable_buffers=[b.storage for b in pte_file.mutable_data]
        if pte_file.mutable_data is not None else None,
        delegate_alignment=delegate_alignment)


@dataclass
class _ExtendedHeader:
    """The ``eh00`` header at byte 8 of a .pte with segments, as ExecuTorch's tools read it:
    ``from_bytes`` does not validate (``is_valid`` does); ``to_bytes`` always writes the
    current magic and length (edgetorch's ``schema._pte_writer.ExtendedHeader``)."""

    EXPECTED_MAGIC: ClassVar[bytes] = ExtendedHeader.MAGIC
    MINIMUM_LENGTH: ClassVar[int] = ExtendedHeader.MIN_LENGTH
    EXPECTED_LENGTH: ClassVar[int] = ExtendedHeader.LENGTH
    NUM_HEAD_BYTES: ClassVar[int] = 64  # enough of a file's head to find the header

    program_size: int
    segment_base_offset: int
    segment_data_size: int
    magic: bytes = ExtendedHeader.MAGIC
    length: int = ExtendedHeader.LENGTH

    @staticmethod
    def from_bytes(data: bytes) -> _ExtendedHeader:
        if len(data) < _ExtendedHeader.EXPECTED_LENGTH:
            raise ValueError(f"not enough data for an extended header: {len(data)} < "
                             f"{_ExtendedHeader.EXPECTED_LENGTH} bytes")
        length, program_size, base = struct.unpack_from("<IQQ", data, 4)
        size = struct.unpack_from("<Q", data, 24)[0] if length > _ExtendedHeader.MINIMUM_LENGTH \
            else 0
        return _ExtendedHeader(program_size, base, size, bytes(data[:4]), length)

    def is_valid(self) -> bool:
        return self.magic == self.EXPECTED_MAGIC and self.length >= self.MINIMUM_LENGTH

    def to_bytes(self) -> bytes:
        return ExtendedHeader(self.program_size, self.segment_base_offset,
                              self.segment_data_size).to_bytes()


def _get_extended_header(program_data: bytes) -> _ExtendedHeader | None:
    """The extended header of a .pte, or None when it has none (or a malformed one)."""
    try:
        header = _ExtendedHeader.from_bytes(program_data[8:])
    except ValueError:
        return None
    return header if header.is_valid() else None


@functools.cache
def _union_fields(cls: type) -> frozenset[str]:
    """Fields of a schema dataclass typed as a union of several tables (``EValue.val``,
    ``Instruction.instr_args``); Optional[X] is not one."""
    hints = typing.get_type_hints(cls)
    return frozenset(name for name, hint in hints.items()
                     if typing.get_origin(hint) in (typing.Union, types.UnionType)
                     and len([a for a in typing.get_args(hint) if a is not type(None)]) > 1)


def _jsonable(value: Any) -> Any:
    """Schema dataclasses as dicts (a union field also names its member's type), bytes as
    lists of ints, enums as their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            out[f.name] = _jsonable(item)
            if f.name in _union_fields(type(value)) and item is not None:
                out[f"{f.name}_type"] = type(item).__name__
        return out
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _program_to_json(program: S.Program) -> str:
    """The program as JSON (for comparing and diffing programs)."""
    return json.dumps(_jsonable(program))
