"""A flat TOSA graph in emission order, and its serialisation with tosa-tools' serializer.

The lowering builds a list of ``TInput``/``TConst``/``TOp`` in the order ExecuTorch's final FX
graph has them; names of ops are ``<base>`` then ``<base>_1``, ``<base>_2``... in that order
(FX's naming), so the serialised bytes equal ExecuTorch's. Each op serialises as ExecuTorch's
node visitors do: its output tensor first, then its private constants (RESCALE multipliers,
zero points...), then the operator.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(eq=False)
class TInput:
    name: str
    shape: list[int]
    dtype: str  # tosa DType name: INT8, INT32, ...


@dataclass(eq=False)
class TConst:
    name: str
    shape: list[int]
    dtype: str
    values: np.ndarray


@dataclass(eq=False)
class TOp:
    op: str                      # RESCALE, ADD, CONV2D, ...
    base: str                    # FX name base, e.g. "tosa_rescale_default"
    inputs: list[Any]            # TInput | TConst | TOp
    shape: list[int]
    dtype: str
    attrs: dict = field(default_factory=dict)
    name: str = ""


Node = TInput | TConst | TOp


def assign_names(nodes: list[Node]) -> None:
    seen: Counter = Counter()
    for n in nodes:
        if isinstance(n, TOp):
            k = seen[n.base]
            n.name = n.base if k == 0 else f"{n.base}_{k}"
            seen[n.base] += 1


def multiplier_and_shift(scale: float) -> tuple[int, int]:
    """TOSA RESCALE's 32-bit multiplier and right shift for ``scale`` (as ExecuTorch computes)."""
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << 31))
    if multiplier == 1 << 31:
        multiplier //= 2
        exponent += 1
    shift = 31 - exponent
    if shift > 62:
        multiplier >>= min(31, shift - 62)
        shift = 62
    if not (0 <= multiplier and 2 <= shift <= 62):
        raise ValueError(f"RESCALE scale {scale} is out of TOSA's range (shift {shift})")
    return multiplier, shift


def serialize(nodes: list[Node], outputs: list[TOp | TInput], path: str = "") -> bytes:
    """The TOSA 1.0 flatbuffer for ``nodes`` (one region/block ``main``)."""
    from ..runtime.tosa_tools import require_tosa_tools

    ts = require_tosa_tools("tosa_serializer")
    ser = ts.TosaSerializer(path, targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    dt = ts.DType
    block = ser.currRegion.currBasicBlock
    for n in nodes:
        if isinstance(n, TInput):
            ser.addInputTensor(ts.TosaSerializerTensor(n.name, n.shape, getattr(dt, n.dtype), data=None))
        elif isinstance(n, TConst):
            ser.addConst(n.shape, getattr(dt, n.dtype), n.values, name=n.name)
        elif n.op == "CONST_SHAPE":  # a shape constant: no tensor of its own first
            ser.addConst(n.shape, dt.SHAPE, n.attrs["values"], name=n.name)
        else:
            block.addTensor(n.name, n.shape, getattr(dt, n.dtype))
            _EMIT[n.op](ser, ts, n)
    for out in outputs:
        ser.addOutputTensor(block.tensors[out.name])
    return bytes(ser.serialize())


def _const(ser, ts, shape, dtype: str, values, name: str) -> str:
    ser.addConst(shape, getattr(ts.DType, dtype), values, name=name)
    return name


def _emit_rescale(ser, ts, n: TOp) -> None:
    src = n.inputs[0]
    pairs = [multiplier_and_shift(s) for s in n.attrs["scales"]]
    names = [
        _const(ser, ts, (len(pairs),), "INT32", [m for m, _ in pairs], n.name + "_multipliers"),
        _const(ser, ts, (len(pairs),), "INT8", [s for _, s in pairs], n.name + "_shifts"),
        _const(ser, ts, [1], src.dtype, [n.attrs["input_zp"]], n.name + "_input_zp"),
        _const(ser, ts, [1], n.dtype, [n.attrs["output_zp"]], n.name + "_output_zp"),
    ]
    attr = ts.TosaSerializerAttribute()
    attr.RescaleAttribute(scale32=True, rounding_mode=ts.RoundingMode.SINGLE_ROUND,
                          per_channel=len(pairs) > 1, input_unsigned=False, output_unsigned=False)
    ser.addOperator(ts.Op.RESCALE, inputs=[src.name, *names], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_simple(op: str, attr_method: str):
    def emit(ser, ts, n: TOp) -> None:
        attr = ts.TosaSerializerAttribute()
        getattr(attr, attr_method)(**n.attrs)
        ser.addOperator(getattr(ts.Op, op), inputs=[i.name for i in n.inputs], outputs=[n.name],
                        attributes=attr, location=None)
    return emit


def _emit_conv(op: str, attr_method: str):
    def emit(ser, ts, n: TOp) -> None:
        x, w = n.inputs[0], n.inputs[1]
        in_zp = _const(ser, ts, [1], x.dtype, [n.attrs["input_zp"]], n.name + "_input_zp")
        w_zp = _const(ser, ts, [1], w.dtype, n.attrs["weight_zp"], n.name + "_weight_zp")
        attr = ts.TosaSerializerAttribute()
        getattr(attr, attr_method)(pad=n.attrs["pad"], stride=n.attrs["stride"],
                                   dilation=n.attrs["dilation"], local_bound=False,
                                   acc_type=getattr(ts.DType, _ACC[n.dtype]))
        ser.addOperator(getattr(ts.Op, op), inputs=[i.name for i in n.inputs] + [in_zp, w_zp],
                        outputs=[n.name], attributes=attr, location=None)
    return emit


def _emit_avg_pool(ser, ts, n: TOp) -> None:
    attr = ts.TosaSerializerAttribute()
    attr.AvgPool2dAttribute(kernel=n.attrs["kernel"], stride=n.attrs["stride"],
                            pad=n.attrs["pad"], acc_type=getattr(ts.DType, _ACC[n.dtype]))
    ser.addOperator(ts.Op.AVG_POOL2D, inputs=[i.name for i in n.inputs], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_max_pool(ser, ts, n: TOp) -> None:
    attr = ts.TosaSerializerAttribute()
    attr.MaxPool2dAttribute(kernel=n.attrs["kernel"], stride=n.attrs["stride"],
                            pad=n.attrs["pad"], nan_mode=ts.NanPropagationMode.PROPAGATE)
    ser.addOperator(ts.Op.MAX_POOL2D, inputs=[n.inputs[0].name], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_transpose(ser, ts, n: TOp) -> None:
    attr = ts.TosaSerializerAttribute()
    attr.TransposeAttribute(n.attrs["perms"])
    ser.addOperator(ts.Op.TRANSPOSE, inputs=[n.inputs[0].name], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_clamp(ser, ts, n: TOp) -> None:
    attr = ts.TosaSerializerAttribute()
    as_bytes = {"INT8": "<b", "INT16": "<h", "FP32": "<f"}[n.dtype]  # the bounds' bytes
    attr.ClampAttribute(list(struct.pack(as_bytes, n.attrs["min_val"])),
                        list(struct.pack(as_bytes, n.attrs["max_val"])),
                        nan_mode=ts.NanPropagationMode.PROPAGATE)
    ser.addOperator(ts.Op.CLAMP, inputs=[n.inputs[0].name], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_mul(ser, ts, n: TOp) -> None:
    shift = _const(ser, ts, [1], "INT8", [n.attrs.get("shift", 0)], n.name + "_shift")
    attr = ts.TosaSerializerAttribute()
    attr.MulAttribute()
    ser.addOperator(ts.Op.MUL, inputs=[i.name for i in n.inputs] + [shift], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_matmul(ser, ts, n: TOp) -> None:
    a, b = n.inputs
    a_zp = _const(ser, ts, [1], a.dtype, [n.attrs["a_zp"]], n.name + "_A_ZP")
    b_zp = _const(ser, ts, [1], b.dtype, [n.attrs["b_zp"]], n.name + "_B_ZP")
    attr = ts.TosaSerializerAttribute()
    attr.MatMulAttribute()
    ser.addOperator(ts.Op.MATMUL, inputs=[a.name, b.name, a_zp, b_zp], outputs=[n.name],
                    attributes=attr, location=None)


def _emit_with_nan_mode(op: str, attr_method: str):
    """Operators whose attribute carries TOSA's NaN propagation mode (ExecuTorch: PROPAGATE)."""
    def emit(ser, ts, n: TOp) -> None:
        attr = ts.TosaSerializerAttribute()
        getattr(attr, attr_method)(**n.attrs, nan_mode=ts.NanPropagationMode.PROPAGATE)
        ser.addOperator(getattr(ts.Op, op), inputs=[i.name for i in n.inputs], outputs=[n.name],
                        attributes=attr, location=None)
    return emit


# The accumulator of CONV2D/AVG_POOL2D for each output dtype (ExecuTorch: the output's own
# for FP32, INT32 for int8 graphs, whose convolutions output int32).
_ACC = {"INT32": "INT32", "INT8": "INT32", "INT16": "INT32", "FP32": "FP32"}


_EMIT = {
    "RESCALE": _emit_rescale,
    "ADD": _emit_simple("ADD", "AddAttribute"),
    "CONV2D": _emit_conv("CONV2D", "Conv2dAttribute"),
    "DEPTHWISE_CONV2D": _emit_conv("DEPTHWISE_CONV2D", "DepthwiseConv2dAttribute"),
    "AVG_POOL2D": _emit_avg_pool,
    "TRANSPOSE": _emit_transpose,
    "RESHAPE": _emit_simple("RESHAPE", "ReshapeAttribute"),
    "CLAMP": _emit_clamp,
    "MUL": _emit_mul,
    "SUB": _emit_simple("SUB", "SubAttribute"),
    "CONCAT": _emit_simple("CONCAT", "ConcatAttribute"),
    "MAX_POOL2D": _emit_max_pool,
    "TABLE": _emit_simple("TABLE", "TableAttribute"),
    "SLICE": _emit_simple("SLICE", "SliceAttribute"),
    "REDUCE_SUM": _emit_simple("REDUCE_SUM", "ReduceSumAttribute"),
    "REDUCE_MAX": _emit_with_nan_mode("REDUCE_MAX", "ReduceMaxAttribute"),
    "MAXIMUM": _emit_with_nan_mode("MAXIMUM", "MaximumAttribute"),
    "MINIMUM": _emit_with_nan_mode("MINIMUM", "MinimumAttribute"),
    # the float profile's elementwise functions (no attributes)
    **{op: _emit_simple(op, f"{op.title().replace('_', '')}Attribute")
       for op in ("SIGMOID", "TANH", "EXP", "RECIPROCAL", "RSQRT", "ERF", "LOG", "POW", "ABS")},
    "MATMUL": _emit_matmul,
    "TILE": _emit_simple("TILE", "TileAttribute"),
}
