"""Test helper: a one-layer TOSA 1.0 graph (CONV2D or DEPTHWISE_CONV2D + RESCALE) with random
int8 weights, biases, weight zero point and per-channel scales, written with tosa-tools'
serializer, for compiling with Vela directly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Layer:
    depthwise: bool
    ifm: tuple[int, int, int]  # H, W, C
    ofm_channels: int  # conv: output channels; depthwise: C * multiplier
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    ifm_bits: int = 8
    weight_zp: int = 0
    seed: int = 0
    values: tuple[int, ...] = ()  # draw the weights from these (few values: palette/LUT modes)

    def weights_ohwi(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        in_ch = 1 if self.depthwise else self.ifm[2]
        shape = (self.ofm_channels, *self.kernel, in_ch)
        if self.values:
            return rng.choice(np.array(self.values, np.int8), shape)
        return rng.integers(-128, 128, shape).astype(np.int8)

    def bias(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed + 1)
        limit = 1 << (30 if self.ifm_bits == 8 else 38)
        return rng.integers(-limit, limit, self.ofm_channels)

    def scales(self) -> tuple[np.ndarray, np.ndarray]:
        """RESCALE multipliers and shifts: 31-bit (scale32) after an int32 accumulator, 15-bit
        after int48 (TOSA forbids scale32 with an int48 input)."""
        rng = np.random.default_rng(self.seed + 2)
        bits = 31 if self.ifm_bits == 8 else 15
        multiplier = rng.integers(1 << (bits - 1), (1 << bits) - 1, self.ofm_channels)
        return multiplier, rng.integers(bits - 1, bits + 17, self.ofm_channels)

    def tosa(self) -> bytes:
        import tosa_serializer as ts

        h, w, c = self.ifm
        kh, kw = self.kernel
        (sy, sx), (dy, dx) = self.stride, self.dilation
        oh = (h - dy * (kh - 1) - 1) // sy + 1
        ow = (w - dx * (kw - 1) - 1) // sx + 1
        act, acc = ("INT8", "INT32") if self.ifm_bits == 8 else ("INT16", "INT48")
        dt = ts.DType
        ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        block = ser.currRegion.currBasicBlock
        ser.addInputTensor(ts.TosaSerializerTensor("x", [1, h, w, c], getattr(dt, act), data=None))
        wt = self.weights_ohwi()
        if self.depthwise:  # OHWI [C*M, H, W, 1] -> HWCM
            m = self.ofm_channels // c
            w_values = wt[..., 0].reshape(c, m, kh, kw).transpose(2, 3, 0, 1)
        else:
            w_values = wt
        ser.addConst(list(w_values.shape), dt.INT8, w_values.reshape(-1).tolist(), name="w")
        ser.addConst([self.ofm_channels], getattr(dt, acc), self.bias().tolist(), name="b")
        ser.addConst([1], getattr(dt, act), [0], name="x_zp")
        ser.addConst([1], dt.INT8, [self.weight_zp], name="w_zp")
        block.addTensor("acc", [1, oh, ow, self.ofm_channels], getattr(dt, acc))
        attr = ts.TosaSerializerAttribute()
        method = attr.DepthwiseConv2dAttribute if self.depthwise else attr.Conv2dAttribute
        method(pad=[0, 0, 0, 0], stride=list(self.stride), dilation=list(self.dilation),
               local_bound=False, acc_type=getattr(dt, acc))
        op = ts.Op.DEPTHWISE_CONV2D if self.depthwise else ts.Op.CONV2D
        ser.addOperator(op, inputs=["x", "w", "b", "x_zp", "w_zp"], outputs=["acc"],
                        attributes=attr, location=None)
        multiplier, shift = self.scales()
        scale32 = self.ifm_bits == 8
        ser.addConst([self.ofm_channels], dt.INT32 if scale32 else dt.INT16, multiplier.tolist(),
                     name="m")
        ser.addConst([self.ofm_channels], dt.INT8, shift.tolist(), name="s")
        ser.addConst([1], getattr(dt, acc), [0], name="acc_zp")
        ser.addConst([1], getattr(dt, act), [0], name="y_zp")
        block.addTensor("y", [1, oh, ow, self.ofm_channels], getattr(dt, act))
        attr = ts.TosaSerializerAttribute()
        attr.RescaleAttribute(scale32=scale32, rounding_mode=ts.RoundingMode.SINGLE_ROUND,
                              per_channel=True, input_unsigned=False, output_unsigned=False)
        ser.addOperator(ts.Op.RESCALE, inputs=["acc", "m", "s", "acc_zp", "y_zp"], outputs=["y"],
                        attributes=attr, location=None)
        ser.addOutputTensor(block.tensors["y"])
        return bytes(ser.serialize())
