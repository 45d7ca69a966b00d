"""Dataclasses that mirror ExecuTorch's ``schema/program.fbs`` (file identifier ``ET12``).

One class per table, one field per schema field, in schema order; unions are Python unions of
their member classes. ``flatbuffer.py`` turns these into bytes and back; nothing else knows the
wire format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Union

from .scalar_type import ScalarType

FILE_IDENTIFIER = b"ET12"
# Program.version as ExecuTorch writes it (exir/version.py EXECUTORCH_SCHEMA_VERSION).
SCHEMA_VERSION = 0


class TensorShapeDynamism(IntEnum):
    STATIC = 0
    DYNAMIC_BOUND = 1
    DYNAMIC_UNBOUND = 2


class TensorDataLocation(IntEnum):
    SEGMENT = 0
    EXTERNAL = 1


class DeviceType(IntEnum):
    CPU = 0
    CUDA = 1


class DataLocation(IntEnum):
    INLINE = 0
    SEGMENT = 1


@dataclass
class ContainerMetadata:
    encoded_inp_str: str = ""
    encoded_out_str: str = ""


@dataclass
class Null:
    pass


@dataclass
class AllocationDetails:
    memory_id: int = 0
    memory_offset_low: int = 0
    memory_offset_high: int = 0

    @property
    def memory_offset(self) -> int:
        return self.memory_offset_low | (self.memory_offset_high << 32)

    @staticmethod
    def of(memory_id: int, offset: int) -> AllocationDetails:
        return AllocationDetails(memory_id, offset & 0xFFFFFFFF, offset >> 32)


@dataclass
class ExtraTensorInfo:
    mutable_data_segments_idx: int = 0
    fully_qualified_name: str | None = None
    location: TensorDataLocation = TensorDataLocation.SEGMENT
    device_type: DeviceType = DeviceType.CPU
    device_index: int = 0


@dataclass
class Tensor:
    scalar_type: ScalarType
    storage_offset: int
    sizes: list[int]
    dim_order: list[int]
    requires_grad: bool = False
    data_buffer_idx: int = 0
    allocation_info: AllocationDetails | None = None
    layout: int = 0
    shape_dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC
    extra_tensor_info: ExtraTensorInfo | None = None


@dataclass
class Int:
    int_val: int


@dataclass
class Bool:
    bool_val: bool


@dataclass
class Double:
    double_val: float


@dataclass
class String:
    string_val: str


@dataclass
class IntList:
    items: list[int]  # EValue indices (boxed, so symbolic ints can live in lists)


@dataclass
class DoubleList:
    items: list[float]


@dataclass
class BoolList:
    items: list[bool]


@dataclass
class TensorList:
    items: list[int]  # EValue indices


@dataclass
class OptionalTensorList:
    items: list[int]  # EValue indices, -1 for None


KernelTypes = Union[  # noqa: UP007
    Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList, TensorList,
    OptionalTensorList,
]
# Union member order in program.fbs; the flatbuffer type tag is index + 1 (0 is NONE).
KERNEL_TYPES: tuple[type, ...] = (
    Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList, TensorList,
    OptionalTensorList,
)


@dataclass
class EValue:
    val: KernelTypes


@dataclass
class Operator:
    name: str
    overload: str

    @property
    def qualified_name(self) -> str:
        """The registry key the runtime resolves: ``name.overload`` (or ``name``)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name


@dataclass
class KernelCall:
    op_index: int
    args: list[int]


@dataclass
class DelegateCall:
    delegate_index: int
    args: list[int]


@dataclass
class MoveCall:
    move_from: int
    move_to: int


@dataclass
class JumpFalseCall:
    cond_value_index: int
    destination_instruction: int


@dataclass
class FreeCall:
    value_index: int


InstructionArguments = Union[KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall]  # noqa: UP007
INSTRUCTION_TYPES: tuple[type, ...] = (KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall)


@dataclass
class Instruction:
    instr_args: InstructionArguments


@dataclass
class Frame:
    filename: str = ""
    lineno: int = 0
    name: str = ""
    context: str = ""


@dataclass
class FrameList:
    items: list[Frame]


@dataclass
class BackendDelegateDataReference:
    location: DataLocation
    index: int


@dataclass
class CompileSpec:
    key: str
    value: bytes


@dataclass
class BackendDelegate:
    id: str
    processed: BackendDelegateDataReference
    compile_specs: list[CompileSpec]


@dataclass
class Chain:
    inputs: list[int]
    outputs: list[int]
    instructions: list[Instruction]
    stacktrace: list[FrameList] | None = None


@dataclass
class NonConstBufferDevice:
    buffer_idx: int = 0
    device_type: DeviceType = DeviceType.CPU
    device_index: int = 0


@dataclass
class ExecutionPlan:
    name: str
    container_meta_type: ContainerMetadata
    values: list[EValue]
    inputs: list[int]
    outputs: list[int]
    chains: list[Chain]
    operators: list[Operator]
    delegates: list[BackendDelegate]
    # Index 0 is reserved by ExecuTorch; planned arenas are non_const_buffer_sizes[1:].
    non_const_buffer_sizes: list[int]
    non_const_buffer_device: list[NonConstBufferDevice] | None = None


@dataclass
class Buffer:
    storage: bytes


@dataclass
class BackendDelegateInlineData:
    data: bytes


@dataclass
class DataSegment:
    offset: int
    size: int


@dataclass
class SubsegmentOffsets:
    segment_index: int
    offsets: list[int]


@dataclass
class NamedData:
    key: str
    segment_index: int


@dataclass
class Program:
    version: int
    execution_plan: list[ExecutionPlan]
    constant_buffer: list[Buffer] = field(default_factory=list)
    backend_delegate_data: list[BackendDelegateInlineData] = field(default_factory=list)
    segments: list[DataSegment] = field(default_factory=list)
    constant_segment: SubsegmentOffsets | None = None
    mutable_data_segments: list[SubsegmentOffsets] | None = None
    named_data: list[NamedData] | None = None
