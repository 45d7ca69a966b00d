"""``Program`` dataclasses <-> ``program.fbs`` flatbuffer bytes (file identifier ``ET12``).

``PROGRAM`` declares ExecuTorch 1.5.1's ``schema/program.fbs`` for the engine in ``fbs``. Its
writer follows flatc's Python object API, which ExecuTorch's serializer uses, so the bytes are
identical to ExecuTorch's, not only equivalent; its reader checks every offset and length.
"""

from __future__ import annotations

from . import program as s
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
        s.ContainerMetadata: [F("encoded_inp_str", STRING), F("encoded_out_str", STRING)],
        s.Null: [],
        s.AllocationDetails: [
            F("memory_id", UINT),
            F("memory_offset_low", UINT),
            F("memory_offset_high", UINT),
        ],
        s.ExtraTensorInfo: [
            F("mutable_data_segments_idx", ULONG),
            F("fully_qualified_name", STRING, optional=True),
            F("location", Enum(s.TensorDataLocation)),
            F("device_type", Enum(s.DeviceType)),
            F("device_index", BYTE),
        ],
        s.Tensor: [
            F("scalar_type", Enum(ScalarType)),
            F("storage_offset", INT),
            F("sizes", [INT]),
            F("dim_order", [UBYTE]),
            F("requires_grad", BOOL),
            F("data_buffer_idx", UINT),
            F("allocation_info", s.AllocationDetails),
            F("layout", BYTE),
            F("shape_dynamism", Enum(s.TensorShapeDynamism)),
            F("extra_tensor_info", s.ExtraTensorInfo),
        ],
        s.Int: [F("int_val", LONG)],
        s.Bool: [F("bool_val", BOOL)],
        s.Double: [F("double_val", DOUBLE)],
        s.String: [F("string_val", STRING)],
        s.IntList: _items(LONG),
        s.DoubleList: _items(DOUBLE),
        s.BoolList: _items(BOOL),
        s.TensorList: _items(INT),
        s.OptionalTensorList: _items(INT),
        s.EValue: [F("val", Union(s.KERNEL_TYPES))],
        s.Operator: [F("name", STRING), F("overload", STRING)],
        s.KernelCall: [F("op_index", INT), F("args", [INT])],
        s.DelegateCall: [F("delegate_index", INT), F("args", [INT])],
        s.MoveCall: [F("move_from", INT), F("move_to", INT)],
        s.JumpFalseCall: [F("cond_value_index", INT), F("destination_instruction", INT)],
        s.FreeCall: [F("value_index", INT)],
        s.Instruction: [F("instr_args", Union(s.INSTRUCTION_TYPES))],
        s.Frame: [
            F("filename", STRING),
            F("lineno", INT),
            F("name", STRING),
            F("context", STRING),
        ],
        s.FrameList: [F("items", [s.Frame])],
        s.BackendDelegateDataReference: [F("location", Enum(s.DataLocation)), F("index", UINT)],
        s.CompileSpec: [F("key", STRING), F("value", Bytes(copy=True))],
        s.BackendDelegate: [
            F("id", STRING),
            F("processed", s.BackendDelegateDataReference, required=True),
            F("compile_specs", [s.CompileSpec]),
        ],
        s.Chain: [
            F("inputs", [INT]),
            F("outputs", [INT]),
            F("instructions", [s.Instruction]),
            F("stacktrace", [s.FrameList], optional=True),
        ],
        s.NonConstBufferDevice: [
            F("buffer_idx", INT),
            F("device_type", Enum(s.DeviceType)),
            F("device_index", BYTE),
        ],
        s.ExecutionPlan: [
            F("name", STRING),
            F("container_meta_type", s.ContainerMetadata, default=s.ContainerMetadata),
            F("values", [s.EValue]),
            F("inputs", [INT]),
            F("outputs", [INT]),
            F("chains", [s.Chain]),
            F("operators", [s.Operator]),
            F("delegates", [s.BackendDelegate]),
            F("non_const_buffer_sizes", [LONG]),
            F("non_const_buffer_device", [s.NonConstBufferDevice], optional=True),
        ],
        # Constants and delegate blobs read as zero-copy views (they can be hundreds of MB).
        s.Buffer: [F("storage", Bytes(DEFAULT_TENSOR_ALIGNMENT, "Buffer.storage"))],
        s.BackendDelegateInlineData: [
            F("data", Bytes(DEFAULT_DELEGATE_ALIGNMENT, "BackendDelegateInlineData.data"))
        ],
        s.DataSegment: [F("offset", ULONG), F("size", ULONG)],
        s.SubsegmentOffsets: [F("segment_index", UINT), F("offsets", [ULONG])],
        s.NamedData: [F("key", STRING), F("segment_index", UINT)],
        s.Program: [
            F("version", UINT),
            F("execution_plan", [s.ExecutionPlan]),
            F("constant_buffer", [s.Buffer]),
            F("backend_delegate_data", [s.BackendDelegateInlineData]),
            F("segments", [s.DataSegment]),
            F("constant_segment", s.SubsegmentOffsets),
            F("mutable_data_segments", [s.SubsegmentOffsets], optional=True),
            F("named_data", [s.NamedData], optional=True),
        ],
    },
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
    return PROGRAM.write(
        program,
        identifier=s.FILE_IDENTIFIER,
        aligns={
            "Buffer.storage": constant_tensor_alignment,
            "BackendDelegateInlineData.data": delegate_alignment,
        },
    )


def program_from_flatbuffer(data: bytes | bytearray | memoryview) -> s.Program:
    """Parse ``program.fbs`` flatbuffer bytes into ``Program`` dataclasses.

    Every offset and length is checked against ``data``; problems raise ``FormatError`` naming
    the table, field and offset. ``Buffer.storage`` and ``BackendDelegateInlineData.data`` are
    zero-copy ``memoryview`` slices of ``data``. Absent vectors read as ``[]`` except the
    schema's optional ones (``stacktrace``, ``non_const_buffer_device``,
    ``mutable_data_segments``, ``named_data``), which read as ``None`` as ExecuTorch writes them.
    """
    return PROGRAM.read(
        data, s.Program, identifiers=(s.FILE_IDENTIFIER,), what="program flatbuffer", hint=_HINT
    )
