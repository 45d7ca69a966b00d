"""Single-operator TOSA 1.0 graphs with random parameters, written with tosa-tools' serializer
(no torch, no ExecuTorch), for compiling with Vela directly: CONV2D / DEPTHWISE_CONV2D with
padding, strides, dilation, zero points, biases and per-channel RESCALE; AVG/MAX_POOL2D with
padding; ADD/SUB/MUL/MINIMUM/MAXIMUM/ABS between int8 RESCALEs (as quantized networks lower
them), with broadcasting; TABLE. int16 activations where TOSA and Vela allow them.
"""

from __future__ import annotations

import math

import numpy as np


def quantise(real: float) -> tuple[int, int]:
    """A positive real multiplier as a 31-bit TOSA multiplier and shift."""
    mant, exp = math.frexp(real)
    m = int(round(mant * (1 << 31)))
    if m == 1 << 31:
        m, exp = m // 2, exp + 1
    return m, 31 - exp


class Graph:
    def __init__(self) -> None:
        import tosa_serializer as ts

        self.ts = ts
        self.ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0,
                                     targetDraft=False)
        self.block = self.ser.currRegion.currBasicBlock
        self.n = 0

    def _name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def dt(self, name: str):
        return getattr(self.ts.DType, name)

    def input(self, shape, dtype: str) -> str:
        name = self._name("in")
        self.ser.addInputTensor(self.ts.TosaSerializerTensor(name, list(shape), self.dt(dtype),
                                                             data=None))
        return name

    def const(self, values, dtype: str, shape=None) -> str:
        values = np.asarray(values)
        name = self._name("c")
        self.ser.addConst(list(shape or values.shape), self.dt(dtype),
                          values.reshape(-1).tolist(), name=name)
        return name

    def op(self, op: str, inputs: list[str], shape, dtype: str, attr=None) -> str:
        out = self._name("t")
        self.block.addTensor(out, list(shape), self.dt(dtype))
        if attr is None:
            attr = self.ts.TosaSerializerAttribute()
        self.ser.addOperator(getattr(self.ts.Op, op), inputs=inputs, outputs=[out],
                             attributes=attr, location=None)
        return out

    def attr(self):
        return self.ts.TosaSerializerAttribute()

    def rescale(self, x: str, shape, in_dt: str, out_dt: str, mult, shift, in_zp: int = 0,
                out_zp: int = 0) -> str:
        mult, shift = np.atleast_1d(mult), np.atleast_1d(shift)
        scale32 = in_dt != "INT48"
        a = self.attr()
        a.RescaleAttribute(scale32=scale32, rounding_mode=self.ts.RoundingMode.SINGLE_ROUND,
                           per_channel=mult.size > 1, input_unsigned=False, output_unsigned=False)
        if not scale32:  # 16-bit multipliers
            mult = np.maximum(mult >> 16, 1)
            shift = shift - 16
        inputs = [x, self.const(mult, "INT32" if scale32 else "INT16"), self.const(shift, "INT8"),
                  self.const([in_zp], in_dt), self.const([out_zp], out_dt)]
        return self.op("RESCALE", inputs, shape, out_dt, a)

    def finish(self, out: str) -> bytes:
        self.ser.addOutputTensor(self.block.tensors[out])
        return bytes(self.ser.serialize())


def _out_size(size: int, k: int, stride: int, dil: int, pad0: int, pad1: int) -> tuple[int, int]:
    """Output size and the bottom/right padding that makes TOSA's division exact."""
    span = size + pad0 + pad1 - (k - 1) * dil - 1
    pad1 -= span % stride
    if pad1 < 0:  # cannot take padding away: crop the input instead (caller re-checks)
        pad1 += stride
    return (size + pad0 + pad1 - (k - 1) * dil - 1) // stride + 1, pad1


def conv(rng: np.random.Generator, depthwise: bool = False, bits: int = 8) -> bytes:
    g = Graph()
    act, acc = ("INT8", "INT32") if bits == 8 else ("INT16", "INT48")
    c = int(rng.integers(1, 24))
    mult = int(rng.integers(1, 3)) if depthwise else 1
    cout = c * mult if depthwise else int(rng.integers(1, 40))
    kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    sy, sx = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    dy, dx = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if sy == sx == 1 else (1, 1)
    pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
    h, w = int(rng.integers(kh * dy, 14)), int(rng.integers(kw * dx, 14))
    oh, pb = _out_size(h, kh, sy, dy, pt, int(rng.integers(0, kh)))
    ow, pr = _out_size(w, kw, sx, dx, pl, int(rng.integers(0, kw)))
    x = g.input([1, h, w, c], act)
    in_zp = int(rng.integers(-20, 21)) if bits == 8 else 0
    wts = rng.integers(-127, 128, (cout, kh, kw, 1 if depthwise else c))
    if depthwise:  # OHWI [C*M, kh, kw, 1] -> HWCM
        wconst = g.const(wts[..., 0].reshape(c, mult, kh, kw).transpose(2, 3, 0, 1), "INT8")
    else:
        wconst = g.const(wts, "INT8")
    k_elems = kh * kw * (1 if depthwise else c)
    amp = 74.0 * 74.0 * math.sqrt(k_elems) * (1 if bits == 8 else 128)
    bias = g.const(rng.integers(-int(amp), int(amp) + 1, cout), acc)
    a = g.attr()
    getattr(a, "DepthwiseConv2dAttribute" if depthwise else "Conv2dAttribute")(
        pad=[pt, pb, pl, pr], stride=[sy, sx], dilation=[dy, dx], local_bound=False,
        acc_type=g.dt(acc))
    y = g.op("DEPTHWISE_CONV2D" if depthwise else "CONV2D",
             [x, wconst, bias, g.const([in_zp], act), g.const([0], "INT8")],
             [1, oh, ow, cout], acc, a)
    top = 127 if bits == 8 else 32767
    qs = [quantise(top / amp * float(rng.uniform(0.5, 2.0))) for _ in range(cout)]
    out_zp = int(rng.integers(-10, 11)) if bits == 8 else 0
    out = g.rescale(y, [1, oh, ow, cout], acc, act, [q[0] for q in qs], [q[1] for q in qs],
                    0, out_zp)
    return g.finish(out)


def pool(rng: np.random.Generator, kind: str, bits: int = 8) -> bytes:
    g = Graph()
    act = "INT8" if bits == 8 else "INT16"
    c = int(rng.integers(1, 20))
    k = (int(rng.integers(1, 4)), int(rng.integers(2, 4)))
    s = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    pads = [int(rng.integers(0, k[0])), 0, int(rng.integers(0, k[1])), 0]
    h, w = int(rng.integers(k[0] + 1, 12)), int(rng.integers(k[1] + 1, 12))
    oh, pads[1] = _out_size(h, k[0], s[0], 1, pads[0], int(rng.integers(0, k[0])))
    ow, pads[3] = _out_size(w, k[1], s[1], 1, pads[2], int(rng.integers(0, k[1])))
    x = g.input([1, h, w, c], act)
    a = g.attr()
    if kind == "max":
        a.MaxPool2dAttribute(kernel=list(k), stride=list(s), pad=pads,
                             nan_mode=g.ts.NanPropagationMode.PROPAGATE)
        return g.finish(g.op("MAX_POOL2D", [x], [1, oh, ow, c], act, a))
    a.AvgPool2dAttribute(kernel=list(k), stride=list(s), pad=pads, acc_type=g.dt("INT32"))
    zps = (int(rng.integers(-20, 21)), int(rng.integers(-20, 21))) if bits == 8 else (0, 0)
    return g.finish(g.op("AVG_POOL2D", [x, g.const([zps[0]], act), g.const([zps[1]], act)],
                         [1, oh, ow, c], act, a))


def binary(rng: np.random.Generator, kind: str, bits: int = 8, swap: bool = False) -> bytes:
    """int8 a, b -> RESCALE to int32 -> ADD/SUB/MUL/MINIMUM/MAXIMUM -> RESCALE to int8.
    ``swap``: the first operand is the broadcast one (Vela reverses the operand order)."""
    g = Graph()
    act = "INT8" if bits == 8 else "INT16"
    h, w, c = int(rng.integers(2, 9)), int(rng.integers(2, 9)), int(rng.integers(2, 20))
    shape = [1, h, w, c]
    bshape = [1] + [d if rng.random() < 0.6 else 1 for d in shape[1:]]
    if swap:
        bshape[int(rng.integers(1, 4))] = 1
    a, b = g.input(shape, act), g.input(bshape, act)
    zp = (lambda: int(rng.integers(-30, 31))) if bits == 8 else (lambda: 0)
    lift = 20 if bits == 8 else 15
    if kind in ("add", "sub"):
        ra, rb = float(rng.uniform(0.1, 1.0)), float(rng.uniform(0.1, 1.0))
        real_out = float(rng.uniform(0.4, 1.6)) / (1 << lift)
    elif kind == "mul":
        ra = rb = 1.0 / (1 << lift)
        real_out = float(rng.uniform(0.005, 0.03)) * (1 << (2 * lift)) / (1 << (2 * lift))
        ra = rb = 1.0
    else:  # min/max: both operands on one scale
        ra = rb = float(rng.uniform(0.2, 1.0))
        real_out = float(rng.uniform(0.8, 1.2)) / (1 << lift)
    scale_in = (1 << lift) if kind != "mul" else 1
    qa, qb = quantise(ra * scale_in), quantise(rb * scale_in)
    a32 = g.rescale(a, shape, act, "INT32", qa[0], qa[1], zp(), 0)
    b32 = g.rescale(b, bshape, act, "INT32", qb[0], qb[1], zp(), 0)
    op = {"add": "ADD", "sub": "SUB", "mul": "MUL", "min": "MINIMUM", "max": "MAXIMUM"}[kind]
    attr = g.attr()
    inputs = [a32, b32]
    if kind == "mul":
        attr.MulAttribute()
        inputs.append(g.const([0], "INT8", [1]))
    elif kind in ("add", "sub"):
        getattr(attr, "AddAttribute" if kind == "add" else "SubAttribute")()
    elif kind in ("min", "max"):
        getattr(attr, "MinimumAttribute" if kind == "min" else "MaximumAttribute")(
            nan_mode=g.ts.NanPropagationMode.PROPAGATE)
    if swap:
        inputs[0], inputs[1] = inputs[1], inputs[0]
    y = g.op(op, inputs, shape, "INT32", attr)
    qo = quantise(real_out)
    return g.finish(g.rescale(y, shape, "INT32", act, qo[0], qo[1], 0, zp()))


def unary(rng: np.random.Generator, kind: str) -> bytes:
    """``abs`` (RESCALE, ABS, RESCALE) or ``table`` (an int8 TABLE with a random table)."""
    g = Graph()
    shape = [1, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 20))]
    x = g.input(shape, "INT8")
    if kind == "table":
        table = g.const(rng.integers(-128, 128, 256), "INT8")
        a = g.attr()
        a.TableAttribute()
        return g.finish(g.op("TABLE", [x, table], shape, "INT8", a))
    q = quantise(float(rng.uniform(0.3, 1.0)) * (1 << 20))
    x32 = g.rescale(x, shape, "INT8", "INT32", q[0], q[1], int(rng.integers(-30, 31)), 0)
    a = g.attr()
    a.AbsAttribute()
    y = g.op("ABS", [x32], shape, "INT32", a)
    qo = quantise(float(rng.uniform(0.5, 1.5)) / (1 << 20))
    return g.finish(g.rescale(y, shape, "INT32", "INT8", qo[0], qo[1], 0, int(rng.integers(-30, 31))))


def int32_op(rng: np.random.Generator, kind: str) -> bytes:
    """Operators on int32 tensors: CLZ, ARITHMETIC_RIGHT_SHIFT (rounding or not),
    LOGICAL_LEFT_SHIFT, REDUCE_SUM over the channels."""
    g = Graph()
    shape = [1, int(rng.integers(1, 7)), int(rng.integers(1, 7)), int(rng.integers(1, 17))]
    x = g.input(shape, "INT32")
    a = g.attr()
    if kind == "clz":
        a.ClzAttribute()
        return g.finish(g.op("CLZ", [x], shape, "INT32", a))
    if kind == "reduce_sum":  # of int16-range values, so the int32 sum cannot overflow
        a.ArithmeticRightShiftAttribute(round=False)
        x = g.op("ARITHMETIC_RIGHT_SHIFT", [x, g.const([[[[16]]]], "INT32")], shape, "INT32", a)
        a = g.attr()
        a.ReduceSumAttribute(axis=3)
        return g.finish(g.op("REDUCE_SUM", [x], shape[:3] + [1], "INT32", a))
    s = g.const(rng.integers(0, 32, shape), "INT32")  # TOSA: shifts in 0..31
    if kind == "shl":
        a.LogicalLeftShiftAttribute()
        return g.finish(g.op("LOGICAL_LEFT_SHIFT", [x, s], shape, "INT32", a))
    a.ArithmeticRightShiftAttribute(round=kind == "shr_round")
    return g.finish(g.op("ARITHMETIC_RIGHT_SHIFT", [x, s], shape, "INT32", a))


KINDS = {
    "conv": lambda rng: conv(rng),
    "depthwise": lambda rng: conv(rng, depthwise=True),
    "conv_int16": lambda rng: conv(rng, bits=16),
    "depthwise_int16": lambda rng: conv(rng, depthwise=True, bits=16),
    "avg_pool": lambda rng: pool(rng, "avg"),
    "max_pool": lambda rng: pool(rng, "max"),
    "avg_pool_int16": lambda rng: pool(rng, "avg", 16),
    "max_pool_int16": lambda rng: pool(rng, "max", 16),
    "add": lambda rng: binary(rng, "add"),
    "sub": lambda rng: binary(rng, "sub"),
    "mul": lambda rng: binary(rng, "mul"),
    "minimum": lambda rng: binary(rng, "min"),
    "maximum": lambda rng: binary(rng, "max"),
    "add_int16": lambda rng: binary(rng, "add", 16),
    "sub_swapped": lambda rng: binary(rng, "sub", swap=True),
    "maximum_swapped": lambda rng: binary(rng, "max", swap=True),
    "clz": lambda rng: int32_op(rng, "clz"),
    "shl": lambda rng: int32_op(rng, "shl"),
    "shr": lambda rng: int32_op(rng, "shr"),
    "shr_round": lambda rng: int32_op(rng, "shr_round"),
    "reduce_sum": lambda rng: int32_op(rng, "reduce_sum"),
    "abs": lambda rng: unary(rng, "abs"),
    "table": lambda rng: unary(rng, "table"),
}
