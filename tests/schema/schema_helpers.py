"""A hand-built program that uses every program.fbs feature, shared by the schema tests.

(Imported by module name: pytest puts this directory on sys.path since tests/ has no
__init__.py.)"""

from __future__ import annotations

import math

from edgetorch.schema import program as s
from edgetorch.schema.scalar_type import ScalarType


def _tensor(sizes, **kw) -> s.Tensor:
    return s.Tensor(
        scalar_type=kw.pop("scalar_type", ScalarType.FLOAT),
        storage_offset=0,
        sizes=list(sizes),
        dim_order=list(range(len(sizes))),
        **kw,
    )


def _plan(name: str, delegate_indices: tuple[int, int, int]) -> s.ExecutionPlan:
    values = [
        s.EValue(s.Null()),
        s.EValue(s.Int(-(2**62))),
        s.EValue(s.Bool(True)),
        s.EValue(s.Bool(False)),
        s.EValue(s.Double(1.5)),
        s.EValue(s.Double(-math.inf)),
        s.EValue(_tensor([2, 5], data_buffer_idx=1, requires_grad=True)),
        s.EValue(_tensor([4], scalar_type=ScalarType.LONG, data_buffer_idx=2)),
        s.EValue(
            _tensor(
                [3, 1, 2],
                scalar_type=ScalarType.HALF,
                allocation_info=s.AllocationDetails.of(1, (5 << 32) + 64),
                shape_dynamism=s.TensorShapeDynamism.DYNAMIC_BOUND,
            )
        ),
        s.EValue(
            _tensor(
                [8],
                data_buffer_idx=1,
                allocation_info=s.AllocationDetails.of(1, 0),
                extra_tensor_info=s.ExtraTensorInfo(mutable_data_segments_idx=0),
            )
        ),
        s.EValue(
            _tensor(
                [16, 16],
                scalar_type=ScalarType.BFLOAT16,
                extra_tensor_info=s.ExtraTensorInfo(
                    fully_qualified_name="layers.0.weight",
                    location=s.TensorDataLocation.EXTERNAL,
                    device_type=s.DeviceType.CUDA,
                    device_index=1,
                ),
            )
        ),
        s.EValue(s.String("héllo ✓")),
        s.EValue(s.IntList([1, 2, 9])),
        s.EValue(s.DoubleList([0.25, -3.0, math.inf])),
        s.EValue(s.BoolList([True, False, True])),
        s.EValue(s.TensorList([6, 7])),
        s.EValue(s.OptionalTensorList([6, -1, 8])),
        s.EValue(s.Int(0)),
        s.EValue(s.String("")),
        s.EValue(s.IntList([])),
    ]
    instructions = [
        s.Instruction(s.KernelCall(0, [6, 7, 8])),
        s.Instruction(s.DelegateCall(0, [6, 8])),
        s.Instruction(s.DelegateCall(1, [8, 8])),
        s.Instruction(s.DelegateCall(2, [8])),
        s.Instruction(s.MoveCall(8, 9)),
        s.Instruction(s.JumpFalseCall(2, 0)),
        s.Instruction(s.FreeCall(8)),
        s.Instruction(s.KernelCall(1, [])),
    ]
    frames = [
        s.FrameList([s.Frame("model.py", 10 + i, "forward", "x = f(x)")])
        for i in range(len(instructions))
    ]
    delegates = [
        s.BackendDelegate(
            f"Backend{i}",
            s.BackendDelegateDataReference(s.DataLocation.INLINE, blob),
            [s.CompileSpec("max_value", bytes([4, 0, i])), s.CompileSpec("empty", b"")],
        )
        for i, blob in enumerate(delegate_indices)
    ]
    return s.ExecutionPlan(
        name=name,
        container_meta_type=s.ContainerMetadata('[1, {"type": "builtins.tuple"}]', "[1, {}]"),
        values=values,
        inputs=[6],
        outputs=[8, 9],
        chains=[s.Chain([6], [8], instructions, stacktrace=frames), s.Chain([], [], [])],
        operators=[s.Operator("aten::add", "out"), s.Operator("aten::sym_size", "")],
        delegates=delegates,
        non_const_buffer_sizes=[0, 1024, 2**40],
        non_const_buffer_device=[s.NonConstBufferDevice(1, s.DeviceType.CUDA, 0)],
    )


def make_rich_program() -> tuple[s.Program, dict]:
    """A program using every table, union member and container feature, plus the
    serialize_pte keyword arguments (constants, delegate blobs, named and mutable data)."""
    program = s.Program(
        version=0,
        execution_plan=[_plan("forward", (0, 1, 2)), _plan("encode", (3, 1, 4))],
        constant_segment=s.SubsegmentOffsets(0, []),
    )
    kwargs = {
        "constant_buffers": [b"", bytes(range(40)), b"\x07" * 32, b"abc"],
        "delegate_blobs": [b"delegate-A" * 30, b"delegate-B" * 5, b"", b"delegate-A" * 30, b""],
        "named_data": {
            "shared.weight": (b"\x11" * 100, 1),
            "shared.alias": (b"\x11" * 100, 64),
            "blob": (b"\x22" * 10, 32),
        },
        "mutable_buffers": [b"", b"\x33" * 12, b"\x44" * 5],
    }
    return program, kwargs
