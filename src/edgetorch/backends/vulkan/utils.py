"""What the Vulkan partitioner and passes ask of a graph node: its tensors, dtypes, shapes,
where it comes from, and the storage (texture or buffer) and memory layout its tensors may use.

The storage choice follows ExecuTorch 1.5.1's ``backends/vulkan/utils.py``: a ``TensorRepSet``
holds the layouts a tensor may take as a buffer and as a texture; ``OpRepSets`` holds them for
every argument and output of one operator call, with ExecuTorch's three rules that keep
tensors in sync (all arguments alike, all outputs alike, primary input like the first
output). Python ``set`` iteration decides which layout is "first", exactly as in ExecuTorch,
so the sets here are built with the same operations in the same order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch._export.utils import is_buffer, is_lifted_tensor_constant, is_param
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import ExportedProgram

from ...errors import ParamMutationConflictError
from ...exir.tensor import TensorSpec
from .serialization.vulkan_graph_schema import VkDataType, VkMemoryLayout, VkStorageType

# ---- dtypes -----------------------------------------------------------------------------

VULKAN_DTYPES: dict[torch.dtype, VkDataType] = {
    torch.bool: VkDataType.BOOL,
    torch.uint8: VkDataType.UINT8,
    torch.int8: VkDataType.INT8,
    torch.int32: VkDataType.INT32,
    torch.int64: VkDataType.INT64,
    torch.float16: VkDataType.FLOAT16,
    torch.float32: VkDataType.FLOAT32,
    torch.float64: VkDataType.FLOAT64,
}

DtypeSet = set
FP_T: DtypeSet = {torch.float16, torch.float32}
INT_T: DtypeSet = {torch.int32, torch.int64}
QINT8_T: DtypeSet = {torch.int8}
BOOL_T: DtypeSet = {torch.bool}
ALL_T: DtypeSet = set(VULKAN_DTYPES)
NONE_T: DtypeSet = set()  # a non-tensor position: not checked
FP_INT_T: DtypeSet = FP_T | INT_T
FP_INT_BOOL_T: DtypeSet = FP_T | INT_T | BOOL_T


class _Broadcast(list):
    """A list whose single element stands for every position (ExecuTorch's broadcasting
    lists); past the end it gives ``set()``."""

    def __init__(self, vals: Any) -> None:
        super().__init__(vals if isinstance(vals, list) else [vals])

    def __getitem__(self, idx: int) -> Any:  # type: ignore[override]
        if idx > 0 and len(self) == 1:
            return super().__getitem__(0)
        if idx >= len(self):
            return set()
        return super().__getitem__(idx)

    def __setitem__(self, idx: int, val: Any) -> None:  # type: ignore[override]
        super().__setitem__(0 if idx > 0 and len(self) == 1 else idx, val)

    @property
    def vals(self) -> list:
        return list(self)


class DtypeSetList(_Broadcast):
    """The dtypes allowed at each argument (or output) position."""

    def is_empty(self) -> bool:
        return len(self) == 0

    def any_constrained(self) -> bool:
        return any(len(s) > 0 for s in self)


def get_vk_datatype(dtype: torch.dtype) -> VkDataType:
    if dtype not in VULKAN_DTYPES:
        raise AssertionError(f"Invalid dtype for vulkan_preprocess ({dtype})")
    return VULKAN_DTYPES[dtype]


# ---- what a node holds ------------------------------------------------------------------

def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def is_torch_op_node(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)


def is_single_tensor_node(node: Any) -> bool:
    return isinstance(_val(node), FakeTensor)


def is_tensor_collection_node(node: Any) -> bool:
    val = _val(node)
    return isinstance(val, (list, tuple)) and all(isinstance(x, FakeTensor) for x in val)


def is_tensor_node(node: Any) -> bool:
    """The node makes a tensor, or a list/tuple of tensors."""
    return is_single_tensor_node(node) or is_tensor_collection_node(node)


def is_tensor_arg_node(arg: Any) -> bool:
    if isinstance(arg, torch.fx.Node):
        return is_tensor_node(arg)
    if isinstance(arg, (list, tuple)):
        return len(arg) > 0 and all(is_tensor_node(n) for n in arg)
    return False


def num_tensors_in_node(node: torch.fx.Node) -> int:
    val = node.meta.get("val")
    if isinstance(val, FakeTensor):
        return 1
    if isinstance(val, (list, tuple)) and all(isinstance(x, FakeTensor) for x in val):
        return len(val)
    return 0


def _tensor_vals(node: torch.fx.Node) -> list:
    val = node.meta["val"]
    if isinstance(val, FakeTensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [x for x in val if isinstance(x, FakeTensor)]
    return []


def is_symint_node(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.SymInt)


def ndim_of(node: Any) -> int | None:
    return node.meta["val"].ndim if is_single_tensor_node(node) else None


def is_unsqueezed_vector(node: torch.fx.Node) -> bool:
    """Every dim but the last is 1."""
    if not is_single_tensor_node(node):
        return False
    shape = node.meta["val"].shape
    return len(shape) >= 1 and all(d == 1 for d in shape[:-1])


def tensor_node_is_bool(node: torch.fx.Node) -> bool:
    return any(t.dtype == torch.bool for t in _tensor_vals(node))


def tensor_node_is_high_dim(node: torch.fx.Node) -> bool:
    return any(len(t.shape) > 4 for t in _tensor_vals(node))


def _op_tensors_any(node: torch.fx.Node, pred) -> bool:
    if is_tensor_node(node) and pred(node):
        return True
    return any(is_tensor_node(a) and pred(a) for a in node.args)


def op_contains_bool_tensor(node: torch.fx.Node) -> bool:
    return _op_tensors_any(node, tensor_node_is_bool)


def op_contains_high_dim_tensor(node: torch.fx.Node) -> bool:
    """Some tensor of the call has more than 4 dims."""
    return _op_tensors_any(node, tensor_node_is_high_dim)


def output_dtypes_are_supported(node: torch.fx.Node) -> bool:
    if not is_tensor_node(node):
        return True
    return all(t.dtype in VULKAN_DTYPES for t in _tensor_vals(node))


def io_dtypes_are_supported(node: torch.fx.Node) -> bool:
    """The node's tensors and its tensor arguments all have dtypes the Vulkan delegate knows."""
    if not output_dtypes_are_supported(node):
        return False
    if not is_tensor_node(node):
        return True
    for arg in node.args:
        items = arg if isinstance(arg, (list, tuple)) else [arg]
        if not all(output_dtypes_are_supported(x) for x in items):
            return False
    return True


def check_node_dtypes(node: torch.fx.Node, inputs: DtypeSetList,
                      outputs: DtypeSetList) -> tuple[bool, str]:
    """``(ok, reason)``: every tensor argument and output has a dtype its position allows."""
    for i, arg in enumerate(node.args):
        allowed = inputs[i]
        if len(allowed) == 0:
            continue
        if is_tensor_node(arg):
            val = arg.meta["val"]
            dtype = (val[0] if isinstance(val, (list, tuple)) else val).dtype
            if dtype not in allowed:
                return False, f"input[{i}] dtype {dtype} not in {allowed}"
        elif isinstance(arg, (list, tuple)):
            for j, sub in enumerate(arg):
                if is_tensor_node(sub) and sub.meta["val"].dtype not in allowed:
                    return False, (f"input[{i}][{j}] dtype {sub.meta['val'].dtype} not in "
                                   f"{allowed}")
    out = node.meta.get("val")
    outs = [out] if isinstance(out, FakeTensor) else list(out) if isinstance(
        out, (list, tuple)) else []
    for i, t in enumerate(outs):
        if isinstance(t, FakeTensor):
            allowed = outputs[i]
            if len(allowed) > 0 and t.dtype not in allowed:
                where = "output" if isinstance(out, FakeTensor) else f"output[{i}]"
                return False, f"{where} dtype {t.dtype} not in {allowed}"
    return True, "dtypes valid"


def node_comes_from_any_nn_module_in_set(node: Any, typenames: set[str]) -> bool:
    """Some module on the node's ``nn_module_stack`` has a type name containing one of
    ``typenames`` (a list of nodes: all of them do)."""
    if isinstance(node, (list, tuple)):
        return all(node_comes_from_any_nn_module_in_set(n, typenames) for n in node)
    if not isinstance(node, torch.fx.Node):
        return False
    stack = node.meta.get("nn_module_stack")
    if stack is None:
        return False
    return any(part in typename for _, typename in stack.values() for part in typenames)


# ---- where a placeholder's data comes from ------------------------------------------------

def is_get_attr_node(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "get_attr"


def is_constant(program: ExportedProgram, node: torch.fx.Node) -> bool:
    return node.name in program.graph_signature.inputs_to_lifted_tensor_constants


def is_param_node(program: ExportedProgram, node: torch.fx.Node) -> bool:
    """A parameter, buffer, lifted constant or attribute: data known ahead of time."""
    return (is_get_attr_node(node) or is_param(program, node) or is_buffer(program, node)
            or is_lifted_tensor_constant(program, node))


def is_mutable_buffer_node(node: torch.fx.Node, program: ExportedProgram) -> bool:
    sig = program.graph_signature
    buf = sig.inputs_to_buffers.get(node.target)
    return buf is not None and buf in sig.buffers_to_mutate.values()


# ---- quantization patterns ----------------------------------------------------------------

_DQ_OPS = {"dequantize_per_tensor.tensor", "dequantize_per_tensor.default",
           "dequantize_per_channel.default", "dequantize_per_channel_group.default",
           "dequantize_per_token.default", "dequantize_affine.default"}
_Q_OPS = {"quantize_per_tensor.tensor", "quantize_per_tensor.default",
          "quantize_per_channel.default", "quantize_per_token.default",
          "quantize_affine.default"}


def _short_name(node: torch.fx.Node) -> str | None:
    """``op.overload`` of a call, its namespace dropped (``quantized_decomposed.`` ...)."""
    if node.op != "call_function":
        return None
    names = getattr(node.target, "__name__", "").split(".")
    return ".".join(names[1:] if len(names) > 2 else names)


def is_dequant_node(node: torch.fx.Node) -> bool:
    return _short_name(node) in _DQ_OPS


def is_quant_node(node: torch.fx.Node) -> bool:
    return _short_name(node) in _Q_OPS


def is_choose_qparams_node(node: torch.fx.Node) -> bool:
    return "choose_qparams" in (_short_name(node) or "")


def is_view_copy_node(node: torch.fx.Node) -> bool:
    return "view_copy" in (_short_name(node) or "")


# ---- texture limits and representations --------------------------------------------------

ImageExtents = tuple[int, int, int]
DEFAULT_TEXTURE_LIMITS = (16384, 16384, 2048)
# The Vulkan spec only guarantees maxImageDimension3D >= 2048 (desktop GPUs); mobile GPUs
# commonly allow 16384, ExecuTorch's default.
SMALL_TEXTURE_LIMITS = (2048, 2048, 2048)
DEFAULT_BUFFER_LIMIT = 128 * (1024 * 1024)

L = VkMemoryLayout
all_storage_types: set[VkStorageType] = {VkStorageType.BUFFER, VkStorageType.TEXTURE_3D}
all_memory_layouts: set[VkMemoryLayout] = {L.TENSOR_WIDTH_PACKED, L.TENSOR_HEIGHT_PACKED,
                                           L.TENSOR_CHANNELS_PACKED}
all_quantized_memory_layouts: set[VkMemoryLayout] = {
    L.PACKED_INT8_4W4C, L.PACKED_INT8_4H4W, L.PACKED_INT8_4W, L.PACKED_INT8_4C1W,
    L.PACKED_INT8_CONV2D}
universal_memory_layout_set = all_memory_layouts | all_quantized_memory_layouts

# (packed dim in WHCN order, block size as a buffer, block size as a texture)
_PACKING: dict[VkMemoryLayout, tuple[int, int, int]] = {
    L.TENSOR_WIDTH_PACKED: (0, 1, 4),
    L.TENSOR_HEIGHT_PACKED: (1, 1, 4),
    L.TENSOR_CHANNELS_PACKED: (2, 1, 4),
    L.PACKED_INT8_4W: (0, 4, 4),
    L.PACKED_INT8_4W4C: (2, 4, 4),
    L.PACKED_INT8_4H4W: (0, 4, 4),
    L.PACKED_INT8_4C1W: (2, 4, 16),
    L.PACKED_INT8_CONV2D: (2, 4, 4),
}


def packed_dim_of(layout: VkMemoryLayout) -> int:
    if layout == L.PACKED_INT8_4W:  # not in ExecuTorch's table: its lookup raises KeyError
        raise KeyError(layout)
    return _PACKING[layout][0]


@dataclass(frozen=True)
class PackedDimInfo:
    """The packed dim (WHCN) and how many elements of it one texel/word holds
    (the C++ runtime's ``PackedDimInfo``)."""

    packed_dim: int
    packed_dim_block_size: int

    @classmethod
    def from_repr(cls, layout: VkMemoryLayout,
                  storage: VkStorageType = VkStorageType.BUFFER) -> PackedDimInfo:
        if layout not in _PACKING:
            raise ValueError(f"Unknown memory layout: {layout}")
        dim, as_buffer, as_texture = _PACKING[layout]
        return cls(dim, as_buffer if storage == VkStorageType.BUFFER else as_texture)


def within_buffer_limit(node: torch.fx.Node, buffer_limit: int) -> bool:
    return all(t.numel() < buffer_limit for t in _tensor_vals(node))


# Which of (width, height, channels) each layout packs 4 to a texel.
_PACKED_WHC: dict[VkMemoryLayout, tuple[bool, bool, bool]] = {
    L.TENSOR_WIDTH_PACKED: (True, False, False),
    L.TENSOR_HEIGHT_PACKED: (False, True, False),
    L.TENSOR_CHANNELS_PACKED: (False, False, True),
    L.PACKED_INT8_4W4C: (True, False, True),
    L.PACKED_INT8_4H4W: (True, True, False),
    L.PACKED_INT8_CONV2D: (True, False, True),  # buffer-only: 4W4C's extents, conservatively
}


def required_image_extents(sizes: Any, layout: VkMemoryLayout) -> ImageExtents:
    """The 3-D texture extents (x, y, z) a tensor of ``sizes`` needs in ``layout``."""
    n = len(sizes)
    whcn = [sizes[-1] if n >= 1 else 1, sizes[-2] if n >= 2 else 1, sizes[-3] if n >= 3 else 1]
    batch = sizes[0] if n >= 4 else 1
    if layout not in _PACKED_WHC:
        raise RuntimeError(f"Unsupported memory layout {layout}")
    for i, packed in enumerate(_PACKED_WHC[layout]):
        if packed:
            whcn[i] = (whcn[i] + 3) // 4
    return whcn[0], whcn[1], whcn[2] * batch


def extents_are_valid(extents: ImageExtents, limits: ImageExtents) -> bool:
    return all(e <= lim for e, lim in zip(extents, limits))


def valid_texture_memory_layouts(sizes: Any, limits: ImageExtents) -> set[VkMemoryLayout]:
    return {lay for lay in list(all_memory_layouts)
            if extents_are_valid(required_image_extents(sizes, lay), limits)}


class TensorRepr:
    """A (storage type, memory layout) pair: how one tensor is held on the GPU."""

    __slots__ = ("storage_type", "memory_layout")

    def __init__(self, storage_type: VkStorageType, memory_layout: VkMemoryLayout) -> None:
        self.storage_type = storage_type
        self.memory_layout = memory_layout

    def __str__(self) -> str:
        return f"TensorRepr({self.storage_type}, {self.memory_layout})"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorRepr):
            return NotImplemented
        return (self.storage_type, self.memory_layout) == (other.storage_type,
                                                           other.memory_layout)

    def __hash__(self) -> int:
        return hash((self.storage_type, self.memory_layout))


class TensorReprList(_Broadcast):
    def __str__(self) -> str:
        return f"[{', '.join(str(r) for r in self)}]"

    def storage_type(self, idx: int = 0) -> VkStorageType:
        return list.__getitem__(self, idx).storage_type

    def memory_layout(self, idx: int = 0) -> VkMemoryLayout:
        return list.__getitem__(self, idx).memory_layout


class TensorRepSet:
    """The layouts a tensor may use as a buffer and as a texture."""

    __slots__ = ("valid_buffer_layouts", "valid_texture_layouts")

    def __init__(self, buffer_layouts: set, texture_layouts: set) -> None:
        self.valid_buffer_layouts = buffer_layouts
        self.valid_texture_layouts = texture_layouts

    def __str__(self) -> str:
        buf = ", ".join(x.name for x in self.valid_buffer_layouts)
        tex = ", ".join(x.name for x in self.valid_texture_layouts)
        return f"TensorRepSet(Buffer Layouts: [{buf}], Texture Layouts: [{tex}])"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorRepSet):
            return NotImplemented
        return (self.valid_buffer_layouts == other.valid_buffer_layouts
                and self.valid_texture_layouts == other.valid_texture_layouts)

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> TensorRepSet:
        return TensorRepSet(set(self.valid_buffer_layouts), set(self.valid_texture_layouts))

    def is_empty(self) -> bool:
        return not self.valid_buffer_layouts and not self.valid_texture_layouts

    def make_intersect(self, other: TensorRepSet) -> TensorRepSet:
        return TensorRepSet(self.valid_buffer_layouts & other.valid_buffer_layouts,
                            self.valid_texture_layouts & other.valid_texture_layouts)

    def make_union(self, other: TensorRepSet) -> TensorRepSet:
        return TensorRepSet(self.valid_buffer_layouts | other.valid_buffer_layouts,
                            self.valid_texture_layouts | other.valid_texture_layouts)

    def is_compatible(self, r: TensorRepr) -> bool:
        if r.storage_type == VkStorageType.BUFFER:
            return r.memory_layout in self.valid_buffer_layouts
        if r.storage_type == VkStorageType.TEXTURE_3D:
            return r.memory_layout in self.valid_texture_layouts
        raise RuntimeError(f"Unsupported storage type {r.storage_type}")

    def any_in_common(self, other: TensorRepSet) -> bool:
        return bool(self.valid_buffer_layouts & other.valid_buffer_layouts
                    or self.valid_texture_layouts & other.valid_texture_layouts)

    def texture_is_valid(self) -> bool:
        return len(self.valid_texture_layouts) > 0

    def buffer_is_valid(self) -> bool:
        return len(self.valid_buffer_layouts) > 0

    def first_valid_buffer_layout(self) -> VkMemoryLayout:
        return next(iter(self.valid_buffer_layouts))

    def first_valid_texture_layout(self) -> VkMemoryLayout:
        return next(iter(self.valid_texture_layouts))

    def make_tensor_repr(self) -> TensorRepr:
        """Texture before buffer, then the set's first layout; an empty set (a weight or a
        non-tensor argument) gives the default storage and layout."""
        if self.is_empty():
            return TensorRepr(VkStorageType.DEFAULT_STORAGE, VkMemoryLayout.DEFAULT_LAYOUT)
        if self.texture_is_valid():
            return TensorRepr(VkStorageType.TEXTURE_3D, self.first_valid_texture_layout())
        return TensorRepr(VkStorageType.BUFFER, self.first_valid_buffer_layout())

    def is_constrained(self) -> bool:
        """Empty, or exactly one layout of exactly one storage type: no choice left."""
        nb, nt = len(self.valid_buffer_layouts), len(self.valid_texture_layouts)
        return (nb, nt) in ((0, 0), (1, 0), (0, 1))

    def is_ambiguous(self) -> bool:
        return not self.is_constrained()

    def _possible_pdis(self) -> tuple[set, set]:
        return ({PackedDimInfo.from_repr(x, VkStorageType.BUFFER)
                 for x in self.valid_buffer_layouts},
                {PackedDimInfo.from_repr(x, VkStorageType.TEXTURE_3D)
                 for x in self.valid_texture_layouts})

    def has_same_packed_dim_info_set(self, other: TensorRepSet) -> bool:
        ob, ot = other._possible_pdis()
        sb, st = self._possible_pdis()
        if not (sb or st) or not (ob or ot):
            return True
        return ob == sb and ot == st

    def has_compatible_packed_dim_info_set(self, other: TensorRepSet) -> bool:
        """Every packing ``other`` may use, this set may use too."""
        ob, ot = other._possible_pdis()
        sb, st = self._possible_pdis()
        return ob <= sb and ot <= st

    def constrain_to_compatible_packed_dim(self, other: TensorRepSet) -> TensorRepSet:
        """The layouts of this set whose packing ``other`` allows (``other`` empty: all)."""
        ob, ot = other._possible_pdis()
        if not ob and not ot:
            return self.copy()
        buf = {x for x in self.valid_buffer_layouts
               if ob and PackedDimInfo.from_repr(x, VkStorageType.BUFFER) in ob}
        tex = {x for x in self.valid_texture_layouts
               if ot and PackedDimInfo.from_repr(x, VkStorageType.TEXTURE_3D) in ot}
        return TensorRepSet(buf, tex)


def make_tensor_repset(r: TensorRepr) -> TensorRepSet:
    if r.storage_type == VkStorageType.BUFFER:
        return TensorRepSet({r.memory_layout}, set())
    if r.storage_type == VkStorageType.TEXTURE_3D:
        return TensorRepSet(set(), {r.memory_layout})
    raise RuntimeError(f"Unsupported storage type {r.storage_type}")


def filter_invalid_reprs(val: FakeTensor, repset: TensorRepSet,
                         limits: ImageExtents) -> TensorRepSet:
    """``repset`` without the texture layouts ``val`` cannot fit within ``limits``; tensors
    of more than 4 dims cannot be textures at all."""
    tex = set()
    for layout in repset.valid_texture_layouts:
        if extents_are_valid(required_image_extents(val.shape, layout), limits):
            tex.add(layout)
    if len(val.shape) > 4:
        return TensorRepSet(repset.valid_buffer_layouts, set())
    return TensorRepSet(repset.valid_buffer_layouts, tex)


def filter_invalid_reprs_for_node_list(repset: TensorRepSet, nodes: list,
                                       limits: ImageExtents) -> TensorRepSet:
    """One representation for every tensor of a list argument (``cat``)."""
    common = repset
    for n in nodes:
        common = common.make_intersect(filter_invalid_reprs(n.meta["val"], common, limits))
    return common


def _rs(buf: set, tex: set) -> TensorRepSet:
    return TensorRepSet(buf, tex)


WP, HP, CP = L.TENSOR_WIDTH_PACKED, L.TENSOR_HEIGHT_PACKED, L.TENSOR_CHANNELS_PACKED
CONTIGUOUS_ANY = _rs({WP}, {WP})
CONTIGUOUS_BUFFER = _rs({WP}, set())
WIDTH_PACKED_TEXTURE = _rs(set(), {WP})
HEIGHT_PACKED_TEXTURE = _rs(set(), {HP})
CHANNELS_PACKED_TEXTURE = _rs(set(), {CP})
CHANNELS_PACKED_ANY = _rs({CP}, {CP})
CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER = _rs({WP}, {CP})
ANY_TEXTURE = _rs(set(), all_memory_layouts)
ANY_BUFFER = _rs(all_memory_layouts, set())
ANY_STORAGE = _rs(all_memory_layouts, all_memory_layouts)
PACKED_INT8_BUFFER = _rs(all_quantized_memory_layouts, set())
PACKED_INT8_4W4C_BUFFER = _rs({L.PACKED_INT8_4W4C}, set())
PACKED_INT8_4H4W_BUFFER = _rs({L.PACKED_INT8_4H4W}, set())
PACKED_INT8_4W_BUFFER = _rs({L.PACKED_INT8_4W}, set())
PACKED_INT8_4C1W_BUFFER = _rs({L.PACKED_INT8_4C1W}, set())
PACKED_INT8_CONV2D_BUFFER = _rs({L.PACKED_INT8_CONV2D}, set())
PACKED_INT8_CHANNELS_PACKED_BUFFER = _rs(
    {L.PACKED_INT8_4W4C, L.PACKED_INT8_4C1W, L.PACKED_INT8_CONV2D}, set())
NO_STORAGE = _rs(set(), set())  # a weight the op prepacks itself, or a non-tensor argument
# Any layout: quantized ones only as buffers (there are no quantized textures). The identity
# of intersection, and what a non-tensor argument stands as.
ANY_STORAGE_INCL_PACKED_INT8 = _rs(universal_memory_layout_set, all_memory_layouts)


class TensorRepSetList(_Broadcast):
    def __str__(self) -> str:
        return f"[{', '.join(str(r) for r in self)}]"

    def any_is_empty(self) -> bool:
        return len(self) == 0 or any(r.is_empty() for r in self)


# ---- a node's chosen representation (kept on its TensorSpec, as ExecuTorch keeps it) -----

def has_node_spec_attr(node: torch.fx.Node, attr: str) -> bool:
    return "spec" in node.meta and hasattr(node.meta["spec"], attr)


def set_node_spec_attr(node: torch.fx.Node, attr: str, value: Any) -> None:
    """Set ``attr`` on the node's spec, or on each spec of a list: one value for all, or one
    per spec when ``value`` is a list of the same length."""
    spec = node.meta["spec"]
    if isinstance(spec, TensorSpec):
        setattr(spec, attr, value)
    elif isinstance(spec, (list, tuple)):
        values = value if isinstance(value, (list, tuple)) and len(value) == len(spec) \
            else [value] * len(spec)
        for s, v in zip(spec, values):
            setattr(s, attr, v)
    else:
        raise RuntimeError(f"Cannot set attr for spec of type {type(spec)}")


def get_node_spec_attr(node: torch.fx.Node, attr: str, return_first: bool = True) -> Any:
    spec = node.meta["spec"]
    if isinstance(spec, TensorSpec):
        return getattr(spec, attr, None)
    if isinstance(spec, (list, tuple)):
        if return_first:
            return getattr(spec[0], attr, None)
        return [getattr(s, attr, None) for s in spec]
    raise RuntimeError(f"Cannot get attr for spec of type {type(spec)}")


def has_node_repr(node: Any) -> bool:
    if isinstance(node, (list, tuple)):
        return all(has_node_spec_attr(n, "etvk_node_repr") for n in node)
    return has_node_spec_attr(node, "etvk_node_repr")


def set_node_repr(node: torch.fx.Node, node_repr: TensorRepr | TensorReprList) -> None:
    if isinstance(node_repr, TensorReprList):
        node_repr = [node_repr[i] for i in range(num_tensors_in_node(node))]
    set_node_spec_attr(node, "etvk_node_repr", node_repr)


def get_node_repr(node: torch.fx.Node) -> Any:
    if isinstance(node, (list, tuple)):
        raise NotImplementedError("get_node_repr not implemented for list of nodes")
    return get_node_spec_attr(node, "etvk_node_repr", False)


# ---- weights rewritten in place by the fusion passes --------------------------------------

# ExportedProgram -> {state-dict name: format tag}; weak so a program's record dies with it.
_PARAM_FORMATS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_param_mutation(ep: ExportedProgram, node: torch.fx.Node, tag: str) -> bool:
    """Whether the caller should rewrite the weight behind ``node`` into format ``tag``.

    Keyed on the state-dict name (two placeholders may share one weight), so a weight is
    repacked once however many fused ops read it: the first call records ``tag`` and returns
    True, a repeat with the same tag returns False, and a different tag raises (the weight
    would be packed two incompatible ways)."""
    from ..transforms.utils import get_tensor_name

    formats = _PARAM_FORMATS.setdefault(ep, {})
    key = get_tensor_name(ep, node)
    seen = formats.get(key)
    if seen is None:
        formats[key] = tag
        return True
    if seen == tag:
        return False
    raise ParamMutationConflictError(
        f"weight {key!r} (%{node.name}) was already rewritten as {seen!r}; rewriting it as "
        f"{tag!r} too would corrupt it. Give both callers one format tag, or keep one copy "
        "of the weight per format.")


# ---- small helpers ------------------------------------------------------------------------

def normalize_dims(dims: int | list[int], ndim: int) -> int | list[int]:
    if isinstance(dims, int):
        return dims + ndim if dims < 0 else dims
    return [d + ndim if d < 0 else d for d in dims]


def nchw_dim_to_whcn_dim(nchw_dim: int, ndim: int) -> int:
    if nchw_dim < 0:
        nchw_dim += ndim
    assert 0 <= nchw_dim < ndim
    return ndim - 1 - nchw_dim


def _val_str(val: Any) -> str:
    return f"{val.dtype}: {val.shape}"


def get_node_val_str(node: torch.fx.Node) -> str:
    if is_single_tensor_node(node):
        return _val_str(node.meta["val"])
    if is_tensor_collection_node(node):
        return f"[{', '.join(_val_str(t) for t in node.meta['val'])}]"
    return str(node.meta["val"]) if "val" in node.meta else str(node)


def get_arg_node_val_str(arg: Any) -> str:
    if isinstance(arg, torch.fx.Node):
        return get_node_val_str(arg)
    if isinstance(arg, (list, tuple)):
        return f"[{', '.join(get_arg_node_val_str(n) for n in arg)}]"
    return str(arg)


def node_io_str(node: torch.fx.Node) -> str:
    """``dtype: shape = op(args...)``, for the partitioner's log."""
    from ...exir.dialects.edge._ops import EdgeOpOverload

    t = node.target
    name = t.__name__ if isinstance(t, EdgeOpOverload) else t.name() if isinstance(
        t, torch._ops.OpOverload) else str(t)
    args = "".join(get_arg_node_val_str(a) + ", " for a in node.args)
    return f"{get_node_val_str(node)} = {name}({args} ...)"




from .repsets import OpRepSets as OpRepSets  # noqa: E402  (ExecuTorch's utils.OpRepSets; repsets imports this module)
