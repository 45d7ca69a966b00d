"""Dataclasses that mirror ExecuTorch 1.5's XNNPACK delegate schema (``schema.fbs``, ``XN01``).

One class per table, one field per schema field, in schema order. Tables that several union
members share (``_XNNNode1x1``, ``_XNNNode2x1``, ``_XNNCat``, ``_XNNNodeConv``, ``_XNNPooling2D``)
are base classes and each member is a subclass named after it (``XNNAdd(XNNNode2x1)``), so the
class of a node says which XNNPACK operator it is. Unions are Python unions of their members;
``XNODE_UNION`` / ``XVALUE_UNION`` / ``XNN_QUANT_PARAMS`` list them in tag order (tag = index + 1).

Two fields come from ``runtime_schema.fbs`` (the schema ExecuTorch's C++ runtime is generated
from, identifier ``XN00``) so that older blobs read here too: ``XNNTensorValue.dq_datatype`` and
the deprecated in-flatbuffer constants ``XNNGraph.constant_buffer`` / ``mem_buffer_sizes``.
ExecuTorch 1.5 never writes them; they default to "absent".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Union

FILE_IDENTIFIER = b"XN01"
LEGACY_FILE_IDENTIFIER = b"XN00"

XNN_INVALID_VALUE_ID = 0xFFFFFFFF
UINT64_MAX = 0xFFFFFFFFFFFFFFFF

# Flags (xnnpack.h), as ExecuTorch's AOT side emits them.
XNN_VALUE_FLAG_EXTERNAL_INPUT = 0x1
XNN_VALUE_FLAG_EXTERNAL_OUTPUT = 0x2
XNN_FLAG_TRANSPOSE_WEIGHTS = 0x1  # fully connected: filter is [input_channels, output_channels]
XNN_FLAG_TRANSPOSE_B = 0x1  # batch matrix multiply: input2 is [..., N, K]
XNN_FLAG_TENSORFLOW_SAME_PADDING = 0x4
XNN_FLAG_TENSORFLOW_RESHAPE_2D = 0x4
XNN_FLAG_ALIGN_CORNERS = 0x8
XNN_FLAG_KEEP_DIMS = 0x40


class XNNDatatype(IntEnum):
    xnn_datatype_invalid = 0
    xnn_datatype_fp32 = 1
    xnn_datatype_fp16 = 2
    xnn_datatype_qint8 = 3
    xnn_datatype_quint8 = 4
    xnn_datatype_qint32 = 5
    xnn_datatype_qcint8 = 6
    xnn_datatype_qcint32 = 7
    xnn_datatype_qcint4 = 8
    xnn_datatype_qdint8 = 9
    xnn_datatype_qbint4 = 10
    xnn_datatype_qpint8 = 11
    xnn_datatype_int32 = 12
    xnn_datatype_pfp32 = 13
    xnn_datatype_bf16 = 14


# ---- quantization parameters ------------------------------------------------------------


@dataclass
class PerChannelGroupQuant:
    scale: list[float] = field(default_factory=list)
    channel_dim: int = 0
    group_size: int = 0
    # scale_bf16 (slot 3) is deprecated.
    scale_buffer_idx: int = 0
    num_scales: int = 0


@dataclass
class PerChannelQuant:
    scale: list[float] = field(default_factory=list)
    channel_dim: int = 0
    scale_buffer_idx: int = 0
    num_scales: int = 0


@dataclass
class PerTokenDynamicQuant:
    num_nonbatch_dims: int = 0


@dataclass
class PerTensorQuant:
    scale: float = 0.0
    zero_point: int = 0


XNNQuantParams = Union[  # noqa: UP007
    PerChannelQuant, PerTensorQuant, PerTokenDynamicQuant, PerChannelGroupQuant
]
XNN_QUANT_PARAMS: tuple[type, ...] = (
    PerChannelQuant,
    PerTensorQuant,
    PerTokenDynamicQuant,
    PerChannelGroupQuant,
)

# ---- values -----------------------------------------------------------------------------


@dataclass
class XNNTensorValue:
    datatype: XNNDatatype = XNNDatatype.xnn_datatype_invalid
    num_dims: int = 0
    dims: list[int] = field(default_factory=list)
    constant_buffer_idx: int = 0  # index into XNNGraph.constant_data; 0 = not a constant
    external_id: int = 0  # index into the delegate call's arguments, or XNN_INVALID_VALUE_ID
    flags: int = 0  # XNN_VALUE_FLAG_EXTERNAL_INPUT / _OUTPUT
    id_out: int = 0  # the id nodes use to refer to this value
    dq_datatype: XNNDatatype = XNNDatatype.xnn_datatype_invalid  # runtime_schema.fbs only


@dataclass
class XNNQuantizedTensorValue:
    tensor_value: XNNTensorValue = field(default_factory=XNNTensorValue)
    quant_params: XNNQuantParams = field(default_factory=PerTensorQuant)


XValueUnion = Union[XNNTensorValue, XNNQuantizedTensorValue]  # noqa: UP007
XVALUE_UNION: tuple[type, ...] = (XNNTensorValue, XNNQuantizedTensorValue)


@dataclass
class XValue:
    xvalue_union: XValueUnion

    @property
    def tensor(self) -> XNNTensorValue:
        """The tensor value, unwrapping a quantized one."""
        v = self.xvalue_union
        return v.tensor_value if isinstance(v, XNNQuantizedTensorValue) else v


# ---- node tables shared by several union members ----------------------------------------


@dataclass
class XNNNode1x1:
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNNode2x1:
    input1_id: int
    input2_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNCat:
    axis: int
    input1_id: int
    input2_id: int
    input3_id: int
    input4_id: int
    output_id: int
    flags: int = 0
    input5_id: int = 0


@dataclass
class XNNNodeConv:
    padding_top: int
    padding_right: int
    padding_bottom: int
    padding_left: int
    kernel_height: int
    kernel_width: int
    subsampling_height: int
    subsampling_width: int
    dilation_height: int
    dilation_width: int
    group_input_channels: int
    group_output_channels: int
    groups: int
    adjustment_height: int
    adjustment_width: int
    input1_id: int
    filter_id: int
    bias_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNPooling2D:
    padding_top: int
    padding_right: int
    padding_bottom: int
    padding_left: int
    pooling_height: int
    pooling_width: int
    stride_height: int
    stride_width: int
    dilation_height: int
    dilation_width: int
    input_id: int
    output_id: int
    flags: int = 0


# ---- node tables of their own -----------------------------------------------------------


@dataclass
class XNNStaticTranspose:
    num_dims: int
    perm: list[int]
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticResizeBilinear2D:
    new_height: int
    new_width: int
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticConstantPad:
    pre_paddings: list[int]
    post_paddings: list[int]
    padding_value: float
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNELU:
    alpha: float
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNFullyConnected:
    input1_id: int
    filter_id: int
    bias_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticReshape:
    num_dims: int
    new_shape: list[int]
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNStaticSlice:
    num_dims: int
    offsets: list[int]
    sizes: list[int]
    input_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNScaledDotProductAttention:
    query_id: int
    key_id: int
    value_id: int
    scale_id: int
    mask_id: int
    output_id: int
    flags: int = 0


@dataclass
class XNNArgMaxPooling2d:
    padding_top: int
    padding_right: int
    padding_bottom: int
    padding_left: int
    pooling_height: int
    pooling_width: int
    input_id: int
    output_value_id: int
    output_index_id: int
    flags: int = 0


@dataclass
class XNNLeakyReLU:
    negative_slope: float
    input_id: int
    output_id: int
    flags: int = 0


# ---- union members that alias a shared table --------------------------------------------
# (a subclass adds no fields; its name is the union member's name)


class XNNAdd(XNNNode2x1): ...
class XNNSoftmax(XNNNode1x1): ...
class XNNSigmoid(XNNNode1x1): ...
class XNNClamp(XNNNode1x1): ...
class XNNConv2d(XNNNodeConv): ...
class XNNDiv(XNNNode2x1): ...
class XNNAvgPooling2d(XNNPooling2D): ...
class XNNMinimum(XNNNode2x1): ...
class XNNDepthwiseConv2d(XNNNodeConv): ...
class XNNMaxPooling2d(XNNPooling2D): ...
class XNNMultiply(XNNNode2x1): ...
class XNNSubtract(XNNNode2x1): ...
class XNNFloor(XNNNode1x1): ...
class XNNConvert(XNNNode1x1): ...
class XNNGlobalAvgPooling2d(XNNNode1x1): ...
class XNNSquareRoot(XNNNode1x1): ...
class XNNCeiling(XNNNode1x1): ...
class XNNHardswish(XNNNode1x1): ...
class XNNMaximum(XNNNode2x1): ...
class XNNNegate(XNNNode1x1): ...
class XNNSquare(XNNNode1x1): ...
class XNNAbs(XNNNode1x1): ...
class XNNPReLU(XNNNode2x1): ...
class XNNConcatenate2(XNNCat): ...
class XNNConcatenate3(XNNCat): ...
class XNNConcatenate4(XNNCat): ...
class XNNBatchMatrixMultiply(XNNNode2x1): ...
class XNNConcatenate5(XNNCat): ...
class XNNConvTranspose2d(XNNNodeConv): ...
class XNNReciprocalSquareRoot(XNNNode1x1): ...
class XNNLog(XNNNode1x1): ...
class XNNGelu(XNNNode1x1): ...
class XNNTanh(XNNNode1x1): ...
class XNNExp(XNNNode1x1): ...
class XNNSin(XNNNode1x1): ...
class XNNCopy(XNNNode1x1): ...
class XNNCos(XNNNode1x1): ...


# Tag order of ``union XNodeUnion`` in schema.fbs (tag = index + 1).
XNODE_UNION: tuple[type, ...] = (
    XNNAdd,
    XNNFullyConnected,
    XNNSoftmax,
    XNNSigmoid,
    XNNStaticTranspose,
    XNNClamp,
    XNNConv2d,
    XNNDiv,
    XNNStaticResizeBilinear2D,
    XNNStaticConstantPad,
    XNNAvgPooling2d,
    XNNMinimum,
    XNNDepthwiseConv2d,
    XNNMaxPooling2d,
    XNNMultiply,
    XNNSubtract,
    XNNFloor,
    XNNConvert,
    XNNGlobalAvgPooling2d,
    XNNStaticReshape,
    XNNArgMaxPooling2d,
    XNNSquareRoot,
    XNNCeiling,
    XNNHardswish,
    XNNLeakyReLU,
    XNNMaximum,
    XNNNegate,
    XNNSquare,
    XNNELU,
    XNNAbs,
    XNNPReLU,
    XNNConcatenate2,
    XNNConcatenate3,
    XNNConcatenate4,
    XNNStaticSlice,
    XNNScaledDotProductAttention,
    XNNBatchMatrixMultiply,
    XNNConcatenate5,
    XNNConvTranspose2d,
    XNNReciprocalSquareRoot,
    XNNLog,
    XNNGelu,
    XNNTanh,
    XNNExp,
    XNNSin,
    XNNCopy,
    XNNCos,
)

XNodeUnion = Union[XNODE_UNION]  # type: ignore[valid-type]  # noqa: UP007


@dataclass
class OutputMinMax:
    output_min: float = 0.0
    output_max: float = 0.0


@dataclass
class XNode:
    xnode_union: XNodeUnion
    debug_handle: int = 0
    output_min_max: OutputMinMax | None = None


@dataclass
class ConstantDataOffset:
    """Where constant ``i`` lives: ``named_key`` in the program's named data (ExecuTorch 1.5
    writes a SHA-256 hex digest and ``offset = UINT64_MAX``), or, when ``named_key`` is absent
    (``None``), ``offset``/``size`` bytes into the blob's constant data region.

    The runtime tests presence, not emptiness: ``""`` counts as a (broken) key, as in ExecuTorch.
    Entry 0 is the reserved ``ConstantDataOffset(0, 0, "")`` that ExecuTorch always writes.
    """

    offset: int = 0
    size: int = 0
    named_key: str | None = ""

    @property
    def is_named(self) -> bool:
        return self.named_key is not None


@dataclass
class XNNGraph:
    version: str = "0"
    xnodes: list[XNode] = field(default_factory=list)
    xvalues: list[XValue] = field(default_factory=list)
    num_externs: int = 0
    input_ids: list[int] = field(default_factory=list)  # id_out of each external input value
    output_ids: list[int] = field(default_factory=list)  # id_out of each external output value
    constant_buffer: list[bytes] | None = None  # deprecated (XN00 blobs); slot 6
    mem_buffer_sizes: list[int] | None = None  # deprecated; slot 7
    constant_data: list[ConstantDataOffset] = field(default_factory=list)
