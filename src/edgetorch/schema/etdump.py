"""ETDump: the profiling and debug record a run writes (``devtools/etdump/etdump_schema_flatcc.fbs``).

Dataclasses with ExecuTorch 1.5.1's names (``executorch.devtools.etdump.schema_flatcc``), in
schema field order, and a writer and a checked reader from the ``fbs`` engine. An ETDump file
is a **size-prefixed** flatbuffer with identifier ``ED00`` (extension ``.etdp``): bytes 0..4
hold the size of the rest, the root offset follows, then the identifier.

Only the format lives here; the event tracer and the Inspector build on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..errors import FormatError
from .fbs import (
    BOOL,
    DOUBLE,
    FLATC,
    FLOAT,
    INT,
    LONG,
    STRING,
    UINT,
    ULONG,
    Bytes,
    Enum,
    F,
    Schema,
)
from .scalar_type import ScalarType

FILE_IDENTIFIER = b"ED00"
ETDUMP_VERSION = 0
_HINT = "The ETDump is truncated or corrupted, or is not an ETDump (.etdp); record it again."


class ValueType(str, enum.Enum):
    """``enum ValueType : byte``: which field of a ``Value`` holds the value. Members are the
    schema's names (``"Tensor"``), as ExecuTorch's Python ETDump reads them; the file stores
    their position."""

    NULL = "Null"
    INT = "Int"
    BOOL = "Bool"
    FLOAT = "Float"
    DOUBLE = "Double"
    TENSOR = "Tensor"
    TENSOR_LIST = "TensorList"
    STRING = "String"

    def __str__(self) -> str:
        return self.value


@dataclass
class Tensor:
    """A logged tensor: its data is ``offset`` bytes into the separate debug buffer."""

    scalar_type: ScalarType
    sizes: list[int] = field(default_factory=list)
    strides: list[int] = field(default_factory=list)
    offset: int = 0


@dataclass
class Int:
    int_val: int = 0


@dataclass
class Bool:
    bool_val: bool = False


@dataclass
class Float:
    float_val: float = 0.0


@dataclass
class Double:
    double_val: float = 0.0


@dataclass
class String:
    string_val: str | None = None


@dataclass
class TensorList:
    tensors: list[Tensor] = field(default_factory=list)


@dataclass
class Null:
    pass


@dataclass
class Value:
    """One logged value; ``val`` says which of the other fields holds it."""

    val: ValueType = ValueType.NULL
    tensor: Tensor | None = None
    tensor_list: TensorList | None = None
    int_value: Int | None = None
    float_value: Float | None = None
    double_value: Double | None = None
    bool_value: Bool | None = None
    output: Bool | None = None  # Bool(True) marks a program output


@dataclass
class DebugEvent:
    chain_index: int = 0
    instruction_id: int = -1
    debug_entry: Value | None = None
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    name: str | None = None


@dataclass
class AllocationEvent:
    allocator_id: int = 0
    allocation_size: int = 0


@dataclass
class ProfileEvent:
    name: str | None = None
    chain_index: int = 0
    instruction_id: int = -1
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    delegate_debug_metadata: bytes | None = None
    start_time: int = 0
    end_time: int = 0


@dataclass
class Event:
    """Exactly one of the three is set."""

    profile_event: ProfileEvent | None = None
    allocation_event: AllocationEvent | None = None
    debug_event: DebugEvent | None = None


@dataclass
class Allocator:
    name: str | None = None


@dataclass
class RunData:
    name: str | None = None
    bundled_input_index: int = -1
    allocators: list[Allocator] | None = None
    events: list[Event] | None = None


@dataclass
class ETDump:
    version: int = ETDUMP_VERSION
    run_data: list[RunData] = field(default_factory=list)


ETDumpFlatCC = ETDump  # ExecuTorch's Python name for the root


def _opt(name: str, t) -> F:
    return F(name, t, optional=True)


ETDUMP_SCHEMA = Schema(
    "etdump_schema_flatcc.fbs",
    FLATC,  # as ExecuTorch's Python serializer (flatc from JSON) lays tables out
    {
        Null: [],
        Tensor: [
            F("scalar_type", Enum(ScalarType)),
            F("sizes", [LONG]),
            F("strides", [LONG]),
            F("offset", LONG),
        ],
        Int: [F("int_val", LONG)],
        Bool: [F("bool_val", BOOL)],
        Float: [F("float_val", FLOAT)],
        Double: [F("double_val", DOUBLE)],
        String: [_opt("string_val", STRING)],
        TensorList: [F("tensors", [Tensor])],
        Value: [
            F("val", Enum(ValueType)),
            F("tensor", Tensor),
            F("tensor_list", TensorList),
            F("int_value", Int),
            F("float_value", Float),
            F("double_value", Double),
            F("bool_value", Bool),
            F("output", Bool),
        ],
        DebugEvent: [
            F("chain_index", ULONG),
            F("instruction_id", INT, default=-1),
            F("debug_entry", Value),
            F("delegate_debug_id_int", INT, default=-1),
            _opt("delegate_debug_id_str", STRING),
            _opt("name", STRING),
        ],
        AllocationEvent: [F("allocator_id", INT), F("allocation_size", ULONG)],
        ProfileEvent: [
            _opt("name", STRING),
            F("chain_index", INT),
            F("instruction_id", INT, default=-1),
            F("delegate_debug_id_int", INT, default=-1),
            _opt("delegate_debug_id_str", STRING),
            F("delegate_debug_metadata", Bytes(copy=True), optional=True),
            F("start_time", ULONG),
            F("end_time", ULONG),
        ],
        Event: [
            F("profile_event", ProfileEvent),
            F("allocation_event", AllocationEvent),
            F("debug_event", DebugEvent),
        ],
        Allocator: [_opt("name", STRING)],
        RunData: [
            _opt("name", STRING),
            F("bundled_input_index", INT, default=-1),
            _opt("allocators", [Allocator]),
            _opt("events", [Event]),
        ],
        ETDump: [F("version", UINT), F("run_data", [RunData])],
    },
)

# Which Value field holds the value for each ValueType (Null has none; String has no field).
_VALUE_FIELD = {
    ValueType.INT: "int_value",
    ValueType.BOOL: "bool_value",
    ValueType.FLOAT: "float_value",
    ValueType.DOUBLE: "double_value",
    ValueType.TENSOR: "tensor",
    ValueType.TENSOR_LIST: "tensor_list",
}


def serialize_to_etdump_flatcc(etdump: ETDump, *, size_prefixed: bool = True) -> bytes:
    """ETDump bytes: size-prefixed with identifier ``ED00``, as ExecuTorch's runtime writes."""
    return ETDUMP_SCHEMA.write(etdump, identifier=FILE_IDENTIFIER, size_prefixed=size_prefixed)


def deserialize_from_etdump_flatcc(
    data: bytes | bytearray | memoryview, size_prefixed: bool = True
) -> ETDump:
    """Parse ETDump bytes (ExecuTorch's or ours); anything malformed raises ``FormatError``.

    Besides the flatbuffer checks, every event must hold exactly one of its three kinds and
    every value the field its ``val`` names, so consumers can rely on both.
    """
    etdump = ETDUMP_SCHEMA.read(
        data,
        ETDump,
        identifiers=(FILE_IDENTIFIER,),
        what="ETDump",
        hint=_HINT,
        size_prefixed=size_prefixed,
    )
    for r, run in enumerate(etdump.run_data):
        for e, event in enumerate(run.events or []):
            where = f"ETDump.run_data[{r}].events[{e}]"
            kinds = [k for k in (event.profile_event, event.allocation_event, event.debug_event)
                     if k is not None]
            if len(kinds) != 1:
                raise FormatError(
                    f"ETDump is malformed: {where} has {len(kinds)} of profile_event / "
                    f"allocation_event / debug_event set; exactly one must be. {_HINT}"
                )
            debug = event.debug_event
            if debug is not None and debug.debug_entry is not None:
                _check_value(debug.debug_entry, f"{where}.debug_event.debug_entry")
    return etdump


def _check_value(value: Value, where: str) -> None:
    name = _VALUE_FIELD.get(value.val)
    if name is not None and getattr(value, name) is None:
        raise FormatError(
            f"ETDump is malformed: {where} has val {value.val.name} but no {name}. {_HINT}"
        )
