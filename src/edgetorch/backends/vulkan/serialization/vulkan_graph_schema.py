"""Dataclasses that mirror ExecuTorch 1.5.1's Vulkan delegate schema (``schema.fbs``, ``VK00``).

One class per table, one field per schema field, in schema order; ``GRAPH_TYPES`` lists the
members of ``union GraphTypes`` in tag order (tag = index + 1). The enums' values are the
ones ExecuTorch's C++ runtime (``api::StorageType``, ``utils::GPUMemoryLayout``) switches on.
Torch-free: the runtime reads blobs into these classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

FILE_IDENTIFIER = b"VK00"
NAMED_DATA_OFFSET = 0xFFFFFFFFFFFFFFFF  # VkBytes.offset of a constant kept in named data


class VkDataType(IntEnum):
    BOOL = 0
    UINT8 = 1
    INT8 = 2
    INT32 = 3
    FLOAT16 = 4
    FLOAT32 = 5
    FLOAT64 = 6
    INT64 = 7
    UNSET = 127


class VkStorageType(IntEnum):
    BUFFER = 0
    TEXTURE_3D = 1
    TEXTURE_2D = 2
    DEFAULT_STORAGE = 255

    def __str__(self) -> str:
        return self.name


class VkMemoryLayout(IntEnum):
    TENSOR_WIDTH_PACKED = 0
    TENSOR_HEIGHT_PACKED = 1
    TENSOR_CHANNELS_PACKED = 2
    PACKED_INT8_4W4C = 3
    PACKED_INT8_4H4W = 4
    PACKED_INT8_4W = 5
    PACKED_INT8_4C = 6
    PACKED_INT8_4C1W = 8
    PACKED_INT8_CONV2D = 9
    DEFAULT_LAYOUT = 255

    def __str__(self) -> str:
        return self.name


@dataclass
class OperatorCall:
    """One operator call: its operator by name (``aten.add.Tensor``, ``et_vk.prepack.default``)
    and the value ids of its arguments, the output last."""

    node_id: int
    name: str
    args: list[int] = field(default_factory=list)


@dataclass
class VkTensor:
    datatype: VkDataType
    dims: list[int]
    constant_id: int  # index into VkGraph.constants, or -1
    mem_obj_id: int  # shared memory object, or -1 for a dedicated allocation
    storage_type: VkStorageType = VkStorageType.DEFAULT_STORAGE
    memory_layout: VkMemoryLayout = VkMemoryLayout.DEFAULT_LAYOUT
    # The staging buffer's dtype (the ETensor's), when it differs from datatype (force_fp16).
    staging_datatype: VkDataType = VkDataType.UNSET


@dataclass
class Null:
    pass


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
class IntList:
    items: list[int] = field(default_factory=list)


@dataclass
class DoubleList:
    items: list[float] = field(default_factory=list)


@dataclass
class BoolList:
    items: list[bool] = field(default_factory=list)


@dataclass
class ValueList:
    """A list of other values by id (a tensor list, or ints some of which are symbolic)."""

    items: list[int] = field(default_factory=list)


@dataclass
class String:
    string_val: str


@dataclass
class SymInt:
    value: int


GraphTypes = (Null | Int | Double | Bool | VkTensor | IntList | DoubleList | BoolList | ValueList
              | String | SymInt)
GRAPH_TYPES: tuple[type, ...] = (Null, Int, Double, Bool, VkTensor, IntList, DoubleList,
                                 BoolList, ValueList, String, SymInt)


@dataclass
class VkValue:
    value: GraphTypes


@dataclass
class VkBytes:
    """A region of raw bytes: ``offset``/``length`` in the blob's constant region, or
    ``offset == NAMED_DATA_OFFSET`` and ``named_key`` naming the program's named data."""

    offset: int
    length: int
    named_key: str | None = None


@dataclass
class VkGraph:
    version: str = "0"
    chain: list[OperatorCall] = field(default_factory=list)
    values: list[VkValue] = field(default_factory=list)
    input_ids: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    constants: list[VkBytes] = field(default_factory=list)
    shaders: list[VkBytes] = field(default_factory=list)
    storage_type_override: VkStorageType = VkStorageType.DEFAULT_STORAGE
    memory_layout_override: VkMemoryLayout = VkMemoryLayout.DEFAULT_LAYOUT
