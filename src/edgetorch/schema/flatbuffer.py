"""``Program`` dataclasses <-> ``program.fbs`` flatbuffer bytes (file identifier ``ET12``).

Writing (``_program_writer``) drives ``flatbuffers.Builder`` in exactly the order ExecuTorch
1.5.1's serializer does, so the bytes are identical to ExecuTorch's, not only equivalent.

Reading never uses the flatbuffers accessors; it goes through the bounds-checked primitives in
``_fbreader`` so that any corruption surfaces as a ``FormatError`` naming the table and field.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TypeVar, cast

from ..errors import FormatError
from . import program as s
from ._fbreader import BOOL, F64, I8, I32, I64, U32, U64, FbReader, Table
from ._fbwriter import check_alignment
from ._program_writer import ProgramWriter
from .scalar_type import ScalarType

DEFAULT_TENSOR_ALIGNMENT = 16  # force_align of Buffer.storage in program.fbs
DEFAULT_DELEGATE_ALIGNMENT = 16  # force_align of BackendDelegateInlineData.data

_HINT = (
    "The file is truncated or corrupted, or was not written by ExecuTorch/edgetorch; re-export it."
)


def program_to_flatbuffer(
    program: s.Program,
    *,
    constant_tensor_alignment: int = DEFAULT_TENSOR_ALIGNMENT,
    delegate_alignment: int = DEFAULT_DELEGATE_ALIGNMENT,
) -> bytes:
    """Serialize ``program`` to flatbuffer bytes with file identifier ``ET12``.

    ``constant_tensor_alignment`` and ``delegate_alignment`` replace the ``force_align: 16`` of
    ``Buffer.storage`` and ``BackendDelegateInlineData.data`` (as ExecuTorch's schema patching
    does). Raises ``FormatError`` if a value does not fit its schema type.
    """
    check_alignment(constant_tensor_alignment, "constant_tensor_alignment")
    check_alignment(delegate_alignment, "delegate_alignment")
    w = ProgramWriter(constant_tensor_alignment, delegate_alignment)
    try:
        root = w.program(program)
    except (TypeError, ValueError, AttributeError) as e:
        # flatbuffers' enforce_number raises TypeError for out-of-range scalars.
        raise FormatError(
            f"cannot serialize the program: {e}. Check that every field holds a value of its "
            "schema type (ints in range, enums valid, lists where lists are expected)."
        ) from e
    w.b.Finish(root, file_identifier=s.FILE_IDENTIFIER)
    return bytes(w.b.Output())


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------

_E = TypeVar("_E", bound=IntEnum)


def _enum(t: Table, enum: type[_E], value: int, name: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        t.fail(name, f"{value} is not a valid {enum.__name__}")


def _str(t: Table, slot: int, name: str) -> str:
    value = t.string(slot, name)
    return "" if value is None else value


def _vec(t: Table, slot: int, name: str, code: str = "i", size: int = 4) -> list:
    values = t.scalars(slot, code, size, name)
    return [] if values is None else values


def _read_tensor(t: Table) -> s.Tensor:
    alloc_t = t.table(6, "allocation_info")
    alloc = None
    if alloc_t is not None:
        alloc = s.AllocationDetails(
            alloc_t.scalar(0, U32, 0, "memory_id"),
            alloc_t.scalar(1, U32, 0, "memory_offset_low"),
            alloc_t.scalar(2, U32, 0, "memory_offset_high"),
        )
    extra_t = t.table(9, "extra_tensor_info")
    extra = None
    if extra_t is not None:
        extra = s.ExtraTensorInfo(
            extra_t.scalar(0, U64, 0, "mutable_data_segments_idx"),
            extra_t.string(1, "fully_qualified_name"),
            _enum(extra_t, s.TensorDataLocation, extra_t.scalar(2, I8, 0, "location"), "location"),
            _enum(extra_t, s.DeviceType, extra_t.scalar(3, I8, 0, "device_type"), "device_type"),
            extra_t.scalar(4, I8, 0, "device_index"),
        )
    return s.Tensor(
        scalar_type=_enum(t, ScalarType, t.scalar(0, I8, 0, "scalar_type"), "scalar_type"),
        storage_offset=t.scalar(1, I32, 0, "storage_offset"),
        sizes=_vec(t, 2, "sizes"),
        dim_order=_vec(t, 3, "dim_order", "B", 1),
        requires_grad=t.scalar(4, BOOL, False, "requires_grad"),
        data_buffer_idx=t.scalar(5, U32, 0, "data_buffer_idx"),
        allocation_info=alloc,
        layout=t.scalar(7, I8, 0, "layout"),
        shape_dynamism=_enum(
            t, s.TensorShapeDynamism, t.scalar(8, I8, 0, "shape_dynamism"), "shape_dynamism"
        ),
        extra_tensor_info=extra,
    )


_KERNEL_READERS: dict[type, Callable[[Table], s.KernelTypes]] = {
    s.Null: lambda t: s.Null(),
    s.Int: lambda t: s.Int(t.scalar(0, I64, 0, "int_val")),
    s.Bool: lambda t: s.Bool(t.scalar(0, BOOL, False, "bool_val")),
    s.Double: lambda t: s.Double(t.scalar(0, F64, 0.0, "double_val")),
    s.Tensor: _read_tensor,
    s.String: lambda t: s.String(_str(t, 0, "string_val")),
    s.IntList: lambda t: s.IntList(_vec(t, 0, "items", "q", 8)),
    s.DoubleList: lambda t: s.DoubleList(_vec(t, 0, "items", "d", 8)),
    s.BoolList: lambda t: s.BoolList(_vec(t, 0, "items", "?", 1)),
    s.TensorList: lambda t: s.TensorList(_vec(t, 0, "items")),
    s.OptionalTensorList: lambda t: s.OptionalTensorList(_vec(t, 0, "items")),
}


def _read_evalue(t: Table) -> s.EValue:
    cls, val = t.union(0, 1, s.KERNEL_TYPES, "val")
    return s.EValue(_KERNEL_READERS[cls](val))


def _read_instruction(t: Table) -> s.Instruction:
    cls, a = t.union(0, 1, s.INSTRUCTION_TYPES, "instr_args")
    if cls is s.KernelCall:
        return s.Instruction(s.KernelCall(a.scalar(0, I32, 0, "op_index"), _vec(a, 1, "args")))
    if cls is s.DelegateCall:
        return s.Instruction(
            s.DelegateCall(a.scalar(0, I32, 0, "delegate_index"), _vec(a, 1, "args"))
        )
    if cls is s.MoveCall:
        return s.Instruction(
            s.MoveCall(a.scalar(0, I32, 0, "move_from"), a.scalar(1, I32, 0, "move_to"))
        )
    if cls is s.JumpFalseCall:
        return s.Instruction(
            s.JumpFalseCall(
                a.scalar(0, I32, 0, "cond_value_index"),
                a.scalar(1, I32, 0, "destination_instruction"),
            )
        )
    return s.Instruction(s.FreeCall(a.scalar(0, I32, 0, "value_index")))


def _tables(t: Table, slot: int, name: str, read) -> list:
    items = t.tables(slot, name)
    return [] if items is None else [read(item) for item in items]


def _opt_tables(t: Table, slot: int, name: str, read) -> list | None:
    items = t.tables(slot, name)
    return None if items is None else [read(item) for item in items]


def _read_frame(t: Table) -> s.Frame:
    return s.Frame(
        _str(t, 0, "filename"),
        t.scalar(1, I32, 0, "lineno"),
        _str(t, 2, "name"),
        _str(t, 3, "context"),
    )


def _read_chain(t: Table) -> s.Chain:
    return s.Chain(
        inputs=_vec(t, 0, "inputs"),
        outputs=_vec(t, 1, "outputs"),
        instructions=_tables(t, 2, "instructions", _read_instruction),
        stacktrace=_opt_tables(
            t, 3, "stacktrace", lambda f: s.FrameList(_tables(f, 0, "items", _read_frame))
        ),
    )


def _read_delegate(t: Table) -> s.BackendDelegate:
    ref = t.table(1, "processed")
    if ref is None:
        t.fail("processed", "backend delegate has no processed-data reference")
    processed = s.BackendDelegateDataReference(
        _enum(ref, s.DataLocation, ref.scalar(0, I8, 0, "location"), "location"),
        ref.scalar(1, U32, 0, "index"),
    )
    specs = _tables(
        t,
        2,
        "compile_specs",
        lambda c: s.CompileSpec(_str(c, 0, "key"), bytes(c.ubytes(1, "value") or b"")),
    )
    return s.BackendDelegate(_str(t, 0, "id"), processed, specs)


def _read_plan(t: Table) -> s.ExecutionPlan:
    meta_t = t.table(1, "container_meta_type")
    meta = (
        s.ContainerMetadata()
        if meta_t is None
        else s.ContainerMetadata(
            _str(meta_t, 0, "encoded_inp_str"), _str(meta_t, 1, "encoded_out_str")
        )
    )
    return s.ExecutionPlan(
        name=_str(t, 0, "name"),
        container_meta_type=meta,
        values=_tables(t, 2, "values", _read_evalue),
        inputs=_vec(t, 3, "inputs"),
        outputs=_vec(t, 4, "outputs"),
        chains=_tables(t, 5, "chains", _read_chain),
        operators=_tables(
            t, 6, "operators", lambda o: s.Operator(_str(o, 0, "name"), _str(o, 1, "overload"))
        ),
        delegates=_tables(t, 7, "delegates", _read_delegate),
        non_const_buffer_sizes=_vec(t, 8, "non_const_buffer_sizes", "q", 8),
        non_const_buffer_device=_opt_tables(
            t,
            9,
            "non_const_buffer_device",
            lambda d: s.NonConstBufferDevice(
                d.scalar(0, I32, 0, "buffer_idx"),
                _enum(d, s.DeviceType, d.scalar(1, I8, 0, "device_type"), "device_type"),
                d.scalar(2, I8, 0, "device_index"),
            ),
        ),
    )


def _read_subsegments(t: Table) -> s.SubsegmentOffsets:
    return s.SubsegmentOffsets(t.scalar(0, U32, 0, "segment_index"), _vec(t, 1, "offsets", "Q", 8))


def _blob(t: Table, name: str) -> bytes:
    # A zero-copy memoryview where the dataclass says bytes: constants and delegate blobs can be
    # hundreds of MB, and every consumer only needs the buffer protocol.
    return cast(bytes, t.ubytes(0, name) or memoryview(b""))


def _read_program(t: Table) -> s.Program:
    constant_segment_t = t.table(5, "constant_segment")
    return s.Program(
        version=t.scalar(0, U32, 0, "version"),
        execution_plan=_tables(t, 1, "execution_plan", _read_plan),
        constant_buffer=_tables(t, 2, "constant_buffer", lambda b: s.Buffer(_blob(b, "storage"))),
        backend_delegate_data=_tables(
            t,
            3,
            "backend_delegate_data",
            lambda d: s.BackendDelegateInlineData(_blob(d, "data")),
        ),
        segments=_tables(
            t,
            4,
            "segments",
            lambda d: s.DataSegment(d.scalar(0, U64, 0, "offset"), d.scalar(1, U64, 0, "size")),
        ),
        constant_segment=None
        if constant_segment_t is None
        else _read_subsegments(constant_segment_t),
        mutable_data_segments=_opt_tables(t, 6, "mutable_data_segments", _read_subsegments),
        named_data=_opt_tables(
            t,
            7,
            "named_data",
            lambda n: s.NamedData(_str(n, 0, "key"), n.scalar(1, U32, 0, "segment_index")),
        ),
    )


def program_from_flatbuffer(data: bytes | bytearray | memoryview) -> s.Program:
    """Parse ``program.fbs`` flatbuffer bytes into ``Program`` dataclasses.

    Every offset and length is checked against ``data``; problems raise ``FormatError`` naming
    the table, field and offset. ``Buffer.storage`` and ``BackendDelegateInlineData.data`` are
    zero-copy ``memoryview`` slices of ``data``. Absent vectors read as ``[]`` except the
    schema's optional ones (``stacktrace``, ``non_const_buffer_device``,
    ``mutable_data_segments``, ``named_data``), which read as ``None`` as ExecuTorch writes them.
    """
    r = FbReader(data, what="program flatbuffer", hint=_HINT)
    ident = r.identifier()
    if ident != s.FILE_IDENTIFIER:
        r.fail("file identifier", f"expected {s.FILE_IDENTIFIER!r}, found {ident!r}")
    return _read_program(r.root("Program"))
