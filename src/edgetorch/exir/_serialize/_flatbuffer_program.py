"""A ``Program`` to and from its flatbuffer bytes (ExecuTorch's
``exir._serialize._flatbuffer_program``); edgetorch's one flatbuffer engine
(``edgetorch.schema.flatbuffer``) does the work."""

from __future__ import annotations

from dataclasses import dataclass

from ...schema import program as s
from ...schema.flatbuffer import (
    DEFAULT_DELEGATE_ALIGNMENT,
    DEFAULT_TENSOR_ALIGNMENT,
    program_from_flatbuffer,
    program_to_flatbuffer,
)


@dataclass
class _FlatbufferResult:
    """Serialized flatbuffer ``data`` and the largest alignment its byte vectors were forced to
    (a header inserted in front must keep that alignment)."""

    data: bytes
    max_alignment: int


def _program_to_flatbuffer(program: s.Program, *, constant_tensor_alignment: int | None = None,
                           delegate_alignment: int | None = None) -> _FlatbufferResult:
    """The flatbuffer of ``program`` (no extended header, segments as the program lists them).
    An alignment that is not a power of two raises ``FormatError`` (a ``ValueError``)."""
    tensor = DEFAULT_TENSOR_ALIGNMENT if constant_tensor_alignment is None \
        else constant_tensor_alignment
    delegate = DEFAULT_DELEGATE_ALIGNMENT if delegate_alignment is None else delegate_alignment
    data = program_to_flatbuffer(program, constant_tensor_alignment=tensor,
                                 delegate_alignment=delegate)
    return _FlatbufferResult(data, max(tensor, delegate))


def _flatbuffer_to_program(program_data: bytes) -> s.Program:
    """The ``Program`` in ``program_data`` (a flatbuffer, or a whole .pte: the extended header
    is skipped by the root offset; segments are not read back in)."""
    return program_from_flatbuffer(program_data)
