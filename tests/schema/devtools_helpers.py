"""Rich ETDump / BundledProgram values and a JSON view matching ExecuTorch's dataclasses."""

from __future__ import annotations

import dataclasses
import enum
import struct

from edgetorch.schema import bundled_program as B
from edgetorch.schema import etdump as E
from edgetorch.schema.scalar_type import ScalarType


def jsonable(obj):
    """Our schema dataclasses in the shape ``ref_devtools.jsonable`` gives ExecuTorch's."""
    if dataclasses.is_dataclass(obj):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if isinstance(obj, list):
        return [jsonable(v) for v in obj]
    return obj


def rich_etdump() -> E.ETDump:
    """An ETDump using every table, value kind and optional field."""
    tensor = E.Tensor(ScalarType.FLOAT, [1, 4, 6, 6], [144, 36, 6, 1], 16)

    def debug(value: E.Value, instr: int, **kw) -> E.Event:
        return E.Event(debug_event=E.DebugEvent(0, instr, value, **kw))

    def profile(name: str | None, instr: int, start: int, **kw) -> E.Event:
        return E.Event(profile_event=E.ProfileEvent(name, 0, instr, start_time=start,
                                                    end_time=start + 7, **kw))

    events = [
        debug(E.Value(E.ValueType.TENSOR, tensor=tensor), 0),
        profile("native_call_convolution.out", 0, 100),
        profile("OPERATOR_CALL", 0, 99),
        debug(E.Value(E.ValueType.TENSOR_LIST, tensor_list=E.TensorList(
            [tensor, E.Tensor(ScalarType.LONG, [3], [1], 128)])), 1),
        debug(E.Value(E.ValueType.INT, int_value=E.Int(-(2**40))), 2),
        debug(E.Value(E.ValueType.FLOAT, float_value=E.Float(0.5)), 3),
        debug(E.Value(E.ValueType.DOUBLE, double_value=E.Double(-1.25)), 4),
        debug(E.Value(E.ValueType.BOOL, bool_value=E.Bool(True)), 5),
        debug(E.Value(E.ValueType.NULL), 6, delegate_debug_id_int=3,
              delegate_debug_id_str="xnn", name="n"),
        profile("", -1, 500, delegate_debug_id_str="Fully Connected (NC, F32) GEMM #1",
                delegate_debug_metadata=b"\x00\x01meta"),
        profile("DELEGATE_CALL", 7, 490, delegate_debug_id_int=12),
        E.Event(allocation_event=E.AllocationEvent(1, 4096)),
        E.Event(debug_event=E.DebugEvent(2**64 - 1, 0, E.Value(
            E.ValueType.TENSOR, tensor=E.Tensor(ScalarType.FLOAT, [1, 5], [5, 1], 640),
            output=E.Bool(True)))),
    ]
    return E.ETDump(0, [
        E.RunData("Default", -1, None, [E.Event(profile_event=E.ProfileEvent(
            "Method::init", -1, 0, start_time=1, end_time=2))]),
        E.RunData("Execute", 3, [E.Allocator("method"), E.Allocator("temp")], events),
        E.RunData("empty", -1, None, None),
    ])


def rich_bundled_program(pte: bytes) -> B.BundledProgram:
    """A BundledProgram with every value kind, two suites and ``pte`` embedded."""
    floats = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    tensor = B.Tensor(ScalarType.FLOAT, [2, 2], floats, [0, 1])
    case = B.BundledMethodTestCase(
        [B.Value(tensor), B.Value(B.Int(-7)), B.Value(B.Bool(True)), B.Value(B.Double(0.125))],
        [B.Value(B.Tensor(ScalarType.LONG, [1], struct.pack("<q", 9), [0]))],
    )
    return B.BundledProgram(
        B.BUNDLED_PROGRAM_SCHEMA_VERSION,
        [
            B.BundledMethodTestSuite("encode", [case, B.BundledMethodTestCase([], [])]),
            B.BundledMethodTestSuite("forward", [case]),
        ],
        pte,
    )
