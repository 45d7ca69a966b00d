"""TensorSpec: what the memory planner and the emitter know about one tensor value."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..errors import MemoryPlanningError
from ..schema import program as S
from ..schema.program import DeviceType, TensorShapeDynamism
from ..schema.scalar_type import ScalarType

ALIGNMENT = 16  # ExecuTorch's tensor alignment (exir/tensor.py), for constants and the plan

_DTYPE_TO_SCALAR_TYPE: dict[torch.dtype, ScalarType] = {
    torch.uint8: ScalarType.BYTE,
    torch.int8: ScalarType.CHAR,
    torch.int16: ScalarType.SHORT,
    torch.int32: ScalarType.INT,
    torch.int64: ScalarType.LONG,
    torch.float16: ScalarType.HALF,
    torch.float32: ScalarType.FLOAT,
    torch.float64: ScalarType.DOUBLE,
    torch.complex32: ScalarType.COMPLEX32,
    torch.complex64: ScalarType.COMPLEX64,
    torch.complex128: ScalarType.COMPLEX128,
    torch.bool: ScalarType.BOOL,
    torch.bfloat16: ScalarType.BFLOAT16,
    torch.qint8: ScalarType.QINT8,
    torch.quint8: ScalarType.QUINT8,
    torch.qint32: ScalarType.QINT32,
    torch.uint16: ScalarType.UINT16,
    torch.uint32: ScalarType.UINT32,
    torch.uint64: ScalarType.UINT64,
    torch.float8_e5m2: ScalarType.FLOAT8E5M2,
    torch.float8_e4m3fn: ScalarType.FLOAT8E4M3FN,
}

_MEMORY_FORMAT_ENUM = {
    torch.contiguous_format: 0,
    torch.preserve_format: 1,
    torch.channels_last: 2,
    torch.channels_last_3d: 3,
}


def scalar_type_of(dtype: torch.dtype) -> ScalarType:
    try:
        return _DTYPE_TO_SCALAR_TYPE[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no ExecuTorch ScalarType") from None


def memory_format_enum(fmt: torch.memory_format) -> int:
    return _MEMORY_FORMAT_ENUM[fmt]


def dim_order_of(t: torch.Tensor) -> tuple[int, ...]:
    """The dim order of ``t``: contiguous, or, for a 4-D channels-last tensor, its strides
    sorted largest first (a stable sort, as ExecuTorch's ``dim_order_from_stride``).

    The sort gives (0, 2, 3, 1) for channels-last strides; when size-1 dims make strides tie it
    gives what ExecuTorch writes: (0, 2, 3, 1) for a [1, 8, 1, 1] tensor, (0, 2, 1, 3) for a
    single-channel [1, 1, 20, 12] one (strides (240, 1, 12, 1)), (0, 1, 2, 3) for a contiguous
    one. Other stride patterns (torch's meta functions give ``permute_copy`` permuted strides,
    for instance) are planned as contiguous, which is what the ``_copy`` kernels write.
    """
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return tuple(sorted(range(4), key=lambda d: t.stride(d), reverse=True))
    return tuple(range(t.dim()))


def aligned(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


@dataclass(eq=False)
class TensorSpec:
    """One tensor value of a method: its type, its upper-bound shape and where it lives.

    ``shape`` holds the upper bound of every dimension (the size memory is planned for);
    ``dynamism`` says whether the runtime may shrink it. ``const`` tensors live in the
    constant segment (``storage`` holds their bytes); planned ones get ``mem_id``/``mem_offset``.
    """

    dtype: torch.dtype
    shape: tuple[int, ...]
    dim_order: tuple[int, ...] = None  # type: ignore[assignment]  # None: contiguous
    dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC
    const: bool = False
    storage: torch.Tensor | None = None
    mem_id: int | None = None
    mem_offset: int | None = None
    # [first, last] node positions (inclusive) at which the tensor is alive; set by planning.
    lifetime: list[int | None] = field(default_factory=lambda: [None, None])
    requires_grad: bool = False
    fqn: str | None = None  # fully qualified name for weights and buffers
    # The planner gives no memory to a spec that aliases another (a view) or is produced by
    # the runtime itself (a delegate's or an unbounded output).
    alias_of: TensorSpec | None = None
    # ExecuTorch's planning fields: the shared object the greedy plan put it in, the alignment
    # its allocated size is rounded to, a spec whose bytes it lives inside (at an offset), and
    # the device whose arena it goes to (with ``enable_non_cpu_memory_planning``).
    mem_obj_id: int | None = None
    alignment: int = ALIGNMENT
    storage_base: TensorSpec | None = None
    storage_base_offset: int = 0
    device: DeviceType = DeviceType.CPU
    device_index: int = 0

    def __post_init__(self) -> None:
        self.shape = tuple(self.shape)
        if self.dim_order is None:  # ExecuTorch's TensorSpec(dtype, shape): contiguous
            self.dim_order = tuple(range(len(self.shape)))

    @property
    def scalar_type(self) -> ScalarType:
        return scalar_type_of(self.dtype)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * torch.empty((), dtype=self.dtype).element_size()

    @property
    def allocated_memory(self) -> int:
        return aligned(self.nbytes, self.alignment)

    def realign(self, new_alignment: int) -> int:
        """Round the allocated size to ``new_alignment`` from now on; returns the new size."""
        self.alignment = new_alignment
        return self.allocated_memory

    # ---- ExecuTorch's TensorSpec field names, derived from ours ----
    @property
    def stride(self) -> tuple[int, ...]:
        """Element strides of the (upper-bound) shape laid out in ``dim_order``."""
        strides = [0] * len(self.shape)
        step = 1
        for d in reversed(self.dim_order):
            strides[d] = step
            step *= self.shape[d]
        return tuple(strides)

    @property
    def shape_dynamism(self) -> TensorShapeDynamism:
        return self.dynamism

    @shape_dynamism.setter
    def shape_dynamism(self, value: TensorShapeDynamism) -> None:
        self.dynamism = value

    layout = torch.strided  # edgetorch plans dense tensors only
    is_sparse = False

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, const: bool = False) -> TensorSpec:
        """A static spec of ``tensor``'s dtype, shape and dim order (``const`` keeps its data)."""
        return cls(dtype=tensor.dtype, shape=tuple(int(s) for s in tensor.shape),
                   dim_order=dim_order_of(tensor), const=const,
                   storage=tensor if const else None,
                   requires_grad=bool(tensor.requires_grad))

    @property
    def planned(self) -> bool:
        return self.mem_id is not None and self.mem_offset is not None

    def __repr__(self) -> str:
        where = f" @mem{self.mem_id}+{self.mem_offset}" if self.planned else ""
        kind = " const" if self.const else ""
        device = f" device={self.device.name}:{self.device_index}"
        return (f"TensorSpec({str(self.dtype).removeprefix('torch.')}{list(self.shape)}{kind}"
                f"{where}{device})")


# ---- ExecuTorch's tensor helpers (``exir.tensor``): strides, dim orders, schema values ----

scalar_type_enum = scalar_type_of


def num_bytes_from_shape_and_dtype(shape: torch.Size, dtype: torch.dtype) -> int:
    """Bytes of a contiguous tensor of ``shape`` and ``dtype``."""
    return math.prod(shape) * torch._utils._element_size(dtype)


def contiguous_stride_from_shape(shape: torch.Size) -> tuple[int, ...]:
    """Row-major strides; a size-0 dimension counts as 1, as torch computes them."""
    strides, accum = [], 1
    for size in reversed(shape):
        strides.append(accum)
        accum *= size if not isinstance(size, int) or size != 0 else 1
    return tuple(reversed(strides))


def dim_order_from_stride(stride: tuple[int, ...]) -> tuple[int, ...]:
    """Dimensions from the largest stride to the smallest; equal strides keep their order."""
    if any(s == 0 for s in stride):
        raise ValueError(f"strides {tuple(stride)}: 0 in strides is not supported for ExecuTorch")
    return tuple(sorted(range(len(stride)), key=lambda i: stride[i], reverse=True))


def stride_from_dim_order(sizes: list[int], dim_order: list[int]) -> list[int]:
    """The strides of a dense tensor of ``sizes`` laid out in ``dim_order`` (a size-0
    dimension does not scale the strides outside it)."""
    if not sizes:
        return []
    strides = list(sizes)
    strides[dim_order[-1]] = 1
    for i in range(len(sizes) - 2, -1, -1):
        inner = dim_order[i + 1]
        scale = sizes[inner] if sizes[inner] != 0 else 1
        strides[dim_order[i]] = scale * strides[inner]
    return strides


def make_allocation_info(mem_id: int, mem_offset: int) -> S.AllocationDetails:
    """Where a planned tensor lives: arena ``mem_id`` at byte ``mem_offset`` (64-bit)."""
    if mem_offset < 0:
        raise MemoryPlanningError(f"mem_offset {mem_offset} must not be negative")
    if mem_offset >= 1 << 64:
        raise MemoryPlanningError(f"mem_offset {mem_offset} does not fit in 64 bits")
    return S.AllocationDetails.of(mem_id, mem_offset)


def make_tensor_value(data_buffer_idx: int, allocation_info: S.AllocationDetails | None,
                      spec: TensorSpec, extra: S.ExtraTensorInfo | None = None) -> S.Tensor:
    """The schema ``Tensor`` of ``spec``, as the emitter writes it (``extra``: external or
    named data; a non-CPU device is added to it, as ExecuTorch records only those)."""
    if spec.device != S.DeviceType.CPU:
        extra = extra or S.ExtraTensorInfo()
        extra.device_type, extra.device_index = spec.device, spec.device_index
    return S.Tensor(scalar_type=spec.scalar_type, storage_offset=0, sizes=list(spec.shape),
                    dim_order=list(spec.dim_order), requires_grad=spec.requires_grad,
                    data_buffer_idx=data_buffer_idx, allocation_info=allocation_info or None,
                    layout=0, shape_dynamism=spec.dynamism, extra_tensor_info=extra)
