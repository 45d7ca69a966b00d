"""A ``.pte`` file as ExecuTorch's serializer internals see it (``exir._serialize._program``):
``PTEFile`` (the program with its segments moved back in), ``deserialize_pte_binary`` and
``serialize_pte_binary``. The format code is edgetorch's (``edgetorch.schema.pte``); this
module only converts between its arguments and ExecuTorch's ``PTEFile`` shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...schema import program as s
from ...schema.pte import PteFile, serialize_pte
from ._named_data_store import NamedDataStoreOutput, buffer_bytes
from .data_serializer import DataEntry


@dataclass
class PTEFile:
    """A program whose constants and delegate blobs are inline (``constant_buffer``,
    ``backend_delegate_data``), the initial data of its mutable buffers, and its named data."""

    program: s.Program
    mutable_data: list[s.Buffer] | None = None
    named_data: NamedDataStoreOutput | None = None


def deserialize_pte_binary(program_data: bytes) -> PTEFile:
    """Parse a ``.pte`` file; segment data goes back into the program as ExecuTorch's
    ``_restore_segments`` puts it (constants into ``constant_buffer``, delegate blobs inline)."""
    args = PteFile.parse(program_data).to_serialize_args()
    program: s.Program = args["program"]
    if args["constant_buffers"]:
        program.constant_buffer = [s.Buffer(bytes(b)) for b in args["constant_buffers"]]
    program.backend_delegate_data = [s.BackendDelegateInlineData(bytes(b))
                                     for b in args["delegate_blobs"]]
    mutable = None
    if args["mutable_buffers"] is not None:
        mutable = [s.Buffer(bytes(b)) for b in args["mutable_buffers"]]
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
    program = s.Program(**{**vars(pte_file.program), "constant_buffer": [],
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
