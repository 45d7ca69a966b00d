"""``Program`` dataclasses <-> ``program.fbs`` flatbuffer bytes (file identifier ``ET12``).

``PROGRAM`` declares ExecuTorch 1.5.1's ``schema/program.fbs`` for the engine in ``fbs``. Its
writer follows flatc's Python object API, which ExecuTorch's serializer uses, so the bytes are
identical to ExecuTorch's, not only equivalent; its reader checks every offset and length.
"""

from __future__ import annotations

from . import program as S
from .fbs import (
    BOOL,
    BYTE,
    DOUBLE,
    INT,
    LONG,
    OBJECT_API,
    STRING,
    UBYTE,
    UINT,
    ULONG,
    Bytes,
    Enum,
    F,
    Schema,
    Union,
    check_alignment,
)
from .scalar_type import ScalarType

DEFAULT_TENSOR_ALIGNMENT = 16  # force_align of Buffer.storage in program.fbs
DEFAULT_DELEGATE_ALIGNMENT = 16  # force_align of BackendDelegateInlineData.data

_HINT = (
    "The file is truncated or corrupted, or was not written by ExecuTorch/edgetorch; re-export it."
)


def _items(elem) -> list[F]:
    return [F("items", [elem])]


PROGRAM = Schema(
    "program.fbs",
    OBJECT_API,
    {
        S.ContainerMetadata: [F("encoded_inp_str", STRING), F("encoded_out_str", STRING)],
        S.Null: [],
        S.AllocationDetails: [
            F("memory_id", UINT),
            F("memory_offset_low", UINT),
            F("memory_offset_high", UINT),
        ],
        S.ExtraTensorInfo: [
            F("mutable_data_segments_idx", ULONG),
            F("fully_qualified_name", STRING, optional=True),
            F("location", Enum(S.TensorDataLocation)),
            F("device_type", Enum(S.DeviceType)),
            F("device_index", BYTE),
        ],
        S.Tensor: [
            F("scalar_type", Enum(ScalarType)),
            F("storage_offset", INT),
            F("sizes", [INT]),
            F("dim_order", [UBYTE]),
            F("requires_grad", BOOL),
            F("data_buffer_idx", UINT),
            F("allocation_info", S.AllocationDetails),
            F("layout", BYTE),
            F("shape_dynamism", Enum(S.TensorShapeDynamism)),
            F("extra_tensor_info", S.ExtraTensorInfo),
        ],
        S.Int: [F("int_val", LONG)],
        S.Bool: [F("bool_val", BOOL)],
        S.Double: [F("double_val", DOUBLE)],
        S.String: [F("string_val", STRING)],
        S.IntList: _items(LONG),
        S.DoubleList: _items(DOUBLE),
        S.BoolList: _items(BOOL),
        S.TensorList: _items(INT),
        S.OptionalTensorList: _items(INT),
        S.EValue: [F("val", Union(S.KERNEL_TYPES))],
        S.Operator: [F("name", STRING), F("overload", STRING)],
        S.KernelCall: [F("op_index", INT), F("args", [INT])],
        S.DelegateCall: [F("delegate_index", INT), F("args", [INT])],
        S.MoveCall: [F("move_from", INT), F("move_to", INT)],
        S.JumpFalseCall: [F("cond_value_index", INT), F("destination_instruction", INT)],
        S.FreeCall: [F("value_index", INT)],
        S.Instruction: [F("instr_args", Union(S.INSTRUCTION_TYPES))],
        S.Frame: [
            F("filename", STRING),
            F("lineno", INT),
            F("name", STRING),
            F("context", STRING),
        ],
        S.FrameList: [F("items", [S.Frame])],
        S.BackendDelegateDataReference: [F("location", Enum(S.DataLocation)), F("index", UINT)],
        S.CompileSpec: [F("key", STRING), F("value", Bytes(copy=True))],
        S.BackendDelegate: [
            F("id", STRING),
            F("processed", S.BackendDelegateDataReference, required=True),
            F("compile_specs", [S.CompileSpec]),
        ],
        S.Chain: [
            F("inputs", [INT]),
            F("outputs", [INT]),
            F("instructions", [S.Instruction]),
            F("stacktrace", [S.FrameList], optional=True),
        ],
        S.NonConstBufferDevice: [
            F("buffer_idx", INT),
            F("device_type", Enum(S.DeviceType)),
            F("device_index", BYTE),
        ],
        S.ExecutionPlan: [
            F("name", STRING),
            F("container_meta_type", S.ContainerMetadata, default=S.ContainerMetadata),
            F("values", [S.EValue]),
            F("inputs", [INT]),
            F("outputs", [INT]),
            F("chains", [S.Chain]),
            F("operators", [S.Operator]),
            F("delegates", [S.BackendDelegate]),
            F("non_const_buffer_sizes", [LONG]),
            F("non_const_buffer_device", [S.NonConstBufferDevice], optional=True),
        ],
        # Constants and delegate blobs read as zero-copy views (they can be hundreds of MB).
        S.Buffer: [F("storage", Bytes(DEFAULT_TENSOR_ALIGNMENT, "Buffer.storage"))],
        S.BackendDelegateInlineData: [
            F("data", Bytes(DEFAULT_DELEGATE_ALIGNMENT, "BackendDelegateInlineData.data"))
        ],
        S.DataSegment: [F("offset", ULONG), F("size", ULONG)],
        S.SubsegmentOffsets: [F("segment_index", UINT), F("offsets", [ULONG])],
        S.NamedData: [F("key", STRING), F("segment_index", UINT)],
        S.Program: [
            F("version", UINT),
            F("execution_plan", [S.ExecutionPlan]),
            F("constant_buffer", [S.Buffer]),
            F("backend_delegate_data", [S.BackendDelegateInlineData]),
            F("segments", [S.DataSegment]),
            F("constant_segment", S.SubsegmentOffsets),
            F("mutable_data_segments", [S.SubsegmentOffsets], optional=True),
            F("named_data", [S.NamedData], optional=True),
        ],
    },
)


def program_to_flatbuffer(
    program: S.Program,
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
    return PROGRAM.write(
        program,
        identifier=S.FILE_IDENTIFIER,
        aligns={
            "Buffer.storage": constant_tensor_alignment,
            "BackendDelegateInlineData.data": delegate_alignment,
        },
    )


def program_from_flatbuffer(data: bytes | bytearray | memoryview) -> S.Program:
    """Parse ``program.fbs`` flatbuffer bytes into ``Program`` dataclasses.

    Every offset and length is checked against ``data``; problems raise ``FormatError`` naming
    the table, field and offset. ``Buffer.storage`` and ``BackendDelegateInlineData.data`` are
    zero-copy ``memoryview`` slices of ``data``. Absent vectors read as ``[]`` except the
    schema's optional ones (``stacktrace``, ``non_const_buffer_device``,
    ``mutable_data_segments``, ``named_data``), which read as ``None`` as ExecuTorch writes them.
    """
    return PROGRAM.read(
        data, S.Program, identifiers=(S.FILE_IDENTIFIER,), what="program flatbuffer", hint=_HINT
    )
