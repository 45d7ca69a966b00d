"""BundledProgram (``.bpte``): a ``.pte`` plus test cases for its methods.

Dataclasses with ExecuTorch 1.5.1's names (``executorch.devtools.bundled_program.schema``) for
``devtools/bundled_program/schema/bundled_program_schema.fbs``, identifier ``BP08`` at bytes
4..8 (not size-prefixed), and a writer and a checked reader from the ``fbs`` engine. The
writer follows flatc's Python object API as ExecuTorch's serializer does, so the bytes equal
ExecuTorch's. ``BundledProgram.program`` holds the ``.pte`` verbatim, aligned to 32 bytes; it
reads back as a zero-copy view, and so does each ``Tensor.data``.

Only the format lives here; building test suites and verifying outputs build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .fbs import BOOL, DOUBLE, INT, LONG, OBJECT_API, STRING, UBYTE, UINT, Bytes, Enum, F, Schema
from .fbs import Union as FbUnion
from .scalar_type import ScalarType

FILE_IDENTIFIER = b"BP08"
BUNDLED_PROGRAM_SCHEMA_VERSION = 2
PROGRAM_ALIGNMENT = 32  # force_align of BundledProgram.program
TENSOR_DATA_ALIGNMENT = 16  # force_align of Tensor.data
_HINT = "The .bpte file is truncated or corrupted; bundle the program again."


@dataclass
class Tensor:
    """A bundled input or expected output tensor: dtype, sizes, raw data and dim order."""

    scalar_type: ScalarType
    sizes: list[int] = field(default_factory=list)
    data: bytes = b""
    dim_order: list[int] = field(default_factory=list)


@dataclass
class Int:
    int_val: int = 0


@dataclass
class Bool:
    bool_val: bool = False


@dataclass
class Double:
    double_val: float = 0.0


ValueUnion = Union[Tensor, Int, Bool, Double]  # noqa: UP007
VALUE_UNION: tuple[type, ...] = (Tensor, Int, Bool, Double)  # schema order: tag = index + 1


@dataclass
class Value:
    val: ValueUnion


@dataclass
class BundledMethodTestCase:
    inputs: list[Value] = field(default_factory=list)
    expected_outputs: list[Value] = field(default_factory=list)


@dataclass
class BundledMethodTestSuite:
    method_name: str = ""
    test_cases: list[BundledMethodTestCase] = field(default_factory=list)


@dataclass
class BundledProgram:
    version: int = BUNDLED_PROGRAM_SCHEMA_VERSION
    method_test_suites: list[BundledMethodTestSuite] = field(default_factory=list)
    program: bytes = b""


BUNDLED_PROGRAM_SCHEMA = Schema(
    "bundled_program_schema.fbs",
    OBJECT_API,
    {
        Tensor: [
            F("scalar_type", Enum(ScalarType)),
            F("sizes", [INT]),
            F("data", Bytes(TENSOR_DATA_ALIGNMENT)),
            F("dim_order", [UBYTE]),
        ],
        Int: [F("int_val", LONG)],
        Bool: [F("bool_val", BOOL)],
        Double: [F("double_val", DOUBLE)],
        Value: [F("val", FbUnion(VALUE_UNION))],
        BundledMethodTestCase: [F("inputs", [Value]), F("expected_outputs", [Value])],
        BundledMethodTestSuite: [
            F("method_name", STRING),
            F("test_cases", [BundledMethodTestCase]),
        ],
        BundledProgram: [
            F("version", UINT),
            F("method_test_suites", [BundledMethodTestSuite]),
            F("program", Bytes(PROGRAM_ALIGNMENT)),
        ],
    },
)


def serialize_from_bundled_program_to_flatbuffer(bundled_program: BundledProgram) -> bytes:
    """``.bpte`` bytes for a schema-level ``BundledProgram`` (byte-identical to ExecuTorch's)."""
    return BUNDLED_PROGRAM_SCHEMA.write(bundled_program, identifier=FILE_IDENTIFIER)


def deserialize_from_flatbuffer_to_bundled_program(
    flatbuffer: bytes | bytearray | memoryview,
) -> BundledProgram:
    """Parse ``.bpte`` bytes; anything malformed raises ``FormatError``.

    ``program`` and each ``Tensor.data`` are zero-copy views of ``flatbuffer``.
    """
    return BUNDLED_PROGRAM_SCHEMA.read(
        flatbuffer,
        BundledProgram,
        identifiers=(FILE_IDENTIFIER,),
        what=".bpte bundled program",
        hint=_HINT,
    )
