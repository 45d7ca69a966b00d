"""Method metadata (ExecuTorch's ``MethodMeta`` / ``TensorInfo``), readable without loading."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..schema import program as S
from ..schema.scalar_type import ELEMENT_SIZE, ScalarType


@dataclass(frozen=True)
class TensorInfo:
    """Type and shape of one tensor input or output. Accessors are methods, as in ExecuTorch."""

    _sizes: tuple[int, ...]
    _dtype: ScalarType
    _dim_order: tuple[int, ...]
    _memory_planned: bool
    _dynamism: S.TensorShapeDynamism

    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    def dtype(self) -> ScalarType:
        return self._dtype

    def dim_order(self) -> tuple[int, ...]:
        return self._dim_order

    def is_memory_planned(self) -> bool:
        return self._memory_planned

    def shape_dynamism(self) -> S.TensorShapeDynamism:
        return self._dynamism

    def nbytes(self) -> int:
        return math.prod(self._sizes) * ELEMENT_SIZE.get(self._dtype, 1)

    def __str__(self) -> str:
        dyn = "" if self._dynamism == S.TensorShapeDynamism.STATIC else f" {self._dynamism.name}"
        order = "" if list(self._dim_order) == sorted(self._dim_order) else f" dim_order={list(self._dim_order)}"
        return f"{self._dtype.name.lower()}{list(self._sizes)}{order}{dyn}"


def tensor_info(t: S.Tensor) -> TensorInfo:
    return TensorInfo(
        tuple(int(s) for s in t.sizes),
        ScalarType(t.scalar_type),
        tuple(int(d) for d in t.dim_order),
        t.allocation_info is not None,
        S.TensorShapeDynamism(t.shape_dynamism),
    )


@dataclass(frozen=True)
class ValueInfo:
    """A non-tensor input or output (Int, Double, Bool, String, None)."""

    kind: str

    def __str__(self) -> str:
        return self.kind


def value_info(v: S.EValue) -> TensorInfo | ValueInfo:
    if isinstance(v.val, S.Tensor):
        return tensor_info(v.val)
    return ValueInfo(type(v.val).__name__)


@dataclass(frozen=True)
class MethodMeta:
    _name: str
    _inputs: tuple[TensorInfo | ValueInfo, ...]
    _outputs: tuple[TensorInfo | ValueInfo, ...]
    _buffer_sizes: tuple[int, ...]  # planned arenas (ExecuTorch's index 0 left out)
    _num_instructions: int
    _operators: tuple[str, ...]
    # Planned buffer (0-based) -> (device type, index), for buffers not in host memory.
    _buffer_devices: dict[int, tuple[int, int]] = field(default_factory=dict)

    def name(self) -> str:
        return self._name

    def num_inputs(self) -> int:
        return len(self._inputs)

    def num_outputs(self) -> int:
        return len(self._outputs)

    def input_tensor_meta(self, i: int) -> TensorInfo | ValueInfo:
        return self._inputs[i]

    def output_tensor_meta(self, i: int) -> TensorInfo | ValueInfo:
        return self._outputs[i]

    def num_memory_planned_buffers(self) -> int:
        return len(self._buffer_sizes)

    def memory_planned_buffer_size(self, i: int) -> int:
        return self._buffer_sizes[i]

    def memory_planned_buffer_device(self, i: int) -> tuple[int, int]:
        """``(device type, device index)`` of planned buffer ``i`` (``(0, 0)``: CPU), from the
        plan's ``non_const_buffer_device`` (ExecuTorch's C++ ``MethodMeta`` method)."""
        if not 0 <= i < len(self._buffer_sizes):
            raise IndexError(f"planned buffer {i} is out of range: the method plans "
                             f"{len(self._buffer_sizes)}")
        return self._buffer_devices.get(i, (0, 0))

    def num_instructions(self) -> int:
        return self._num_instructions

    def operators(self) -> tuple[str, ...]:
        return self._operators

    def __str__(self) -> str:
        ins = ", ".join(str(i) for i in self._inputs)
        outs = ", ".join(str(o) for o in self._outputs)
        return (f"MethodMeta({self._name}: inputs ({ins}) -> outputs ({outs}); "
                f"{self._num_instructions} instructions; planned buffers {list(self._buffer_sizes)} bytes)")


def method_meta(plan: S.ExecutionPlan) -> MethodMeta:
    values = plan.values
    instructions = plan.chains[0].instructions if plan.chains else []
    return MethodMeta(
        plan.name,
        tuple(value_info(values[i]) for i in plan.inputs),
        tuple(value_info(values[i]) for i in plan.outputs),
        tuple(int(s) for s in plan.non_const_buffer_sizes[1:]),
        sum(len(c.instructions) for c in plan.chains) if plan.chains else len(instructions),
        tuple(op.qualified_name for op in plan.operators),
        {int(d.buffer_idx) - 1: (int(d.device_type), int(d.device_index))
         for d in plan.non_const_buffer_device or [] if int(d.device_type) != 0},
    )
