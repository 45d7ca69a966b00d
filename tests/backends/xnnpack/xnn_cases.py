"""One small XNNPACK graph per node type and attribute combination, with a torch reference.

Each case builds a graph (``GraphBuilder``) plus inputs; its reference computes the outputs
from the same inputs with torch, converting XNNPACK's NHWC tensors and weight layouts to
torch's. The same table drives the torch comparison and the compat comparison against the
real XNNPACK in ExecuTorch's runtime.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xnn_helpers import INVALID, GraphBuilder

from edgetorch.backends.xnnpack import schema as x


@dataclass
class Case:
    name: str
    build: Callable[[], tuple[GraphBuilder, list[np.ndarray], dict]]
    reference: Callable[..., list]  # (torch, inputs as tensors, consts dict) -> outputs
    atol: float = 1e-5


CASES: list[Case] = []
RNG = np.random.default_rng(0)


def rand(*shape, lo=-2.0, hi=2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def case(name: str, atol: float = 1e-5):
    def deco(fn):
        def build():
            global RNG
            RNG = np.random.default_rng(zlib.crc32(name.encode()))  # same data on every build
            b = GraphBuilder()
            inputs, consts, ref = fn(b)
            return b, inputs, {"consts": consts, "ref": ref}

        CASES.append(Case(name, build, lambda torch, ins, meta: meta["ref"](torch, ins),
                          atol))
        return fn

    return deco


def nchw(t):
    return t.permute(0, 3, 1, 2)


def nhwc(t):
    return t.permute(0, 2, 3, 1)


# ---- elementwise ------------------------------------------------------------------------

_BIN = {
    "add": (x.XNNAdd, lambda a, b: a + b),
    "subtract": (x.XNNSubtract, lambda a, b: a - b),
    "multiply": (x.XNNMultiply, lambda a, b: a * b),
    "div": (x.XNNDiv, lambda a, b: a / b),
    "minimum": (x.XNNMinimum, lambda a, b: a.minimum(b)),
    "maximum": (x.XNNMaximum, lambda a, b: a.maximum(b)),
}


def _binary_case(name, cls, fn, clamp):
    @case(f"{name}{'_clamped' if clamp else ''}")
    def _(b):
        i1, i2 = b.input(2, 3, 4), b.input(1, 4)
        o = b.output(2, 3, 4)
        mm = x.OutputMinMax(-0.5, 0.75) if clamp else None
        b.node(cls(i1, i2, o), mm)
        a, c = rand(2, 3, 4), rand(1, 4, lo=0.5, hi=2.0)

        def ref(torch, ins):
            r = fn(*ins)
            return [r.clamp(-0.5, 0.75) if clamp else r]
        return [a, c], {}, ref


for _name, (_cls, _fn) in _BIN.items():
    _binary_case(_name, _cls, _fn, False)
    if _cls in (x.XNNAdd, x.XNNSubtract, x.XNNMultiply, x.XNNDiv):
        _binary_case(_name, _cls, _fn, True)


@case("prelu")
def _(b):
    i, s = b.input(1, 4, 5, 3), b.input(3)
    o = b.output(1, 4, 5, 3)
    b.node(x.XNNPReLU(i, s, o))
    return [rand(1, 4, 5, 3), rand(3, lo=0, hi=1)], {}, lambda torch, ins: [
        torch.where(ins[0] >= 0, ins[0], ins[0] * ins[1])]


_UN = {
    "sigmoid": (x.XNNSigmoid, lambda t, v: t.sigmoid(v), None),
    "floor": (x.XNNFloor, lambda t, v: t.floor(v), None),
    "ceiling": (x.XNNCeiling, lambda t, v: t.ceil(v), None),
    "square_root": (x.XNNSquareRoot, lambda t, v: t.sqrt(v), (0.1, 4.0)),
    "reciprocal_square_root": (x.XNNReciprocalSquareRoot, lambda t, v: t.rsqrt(v), (0.1, 4.0)),
    "exp": (x.XNNExp, lambda t, v: t.exp(v), None),
    "log": (x.XNNLog, lambda t, v: t.log(v), (0.1, 4.0)),
    "negate": (x.XNNNegate, lambda t, v: -v, None),
    "square": (x.XNNSquare, lambda t, v: v * v, None),
    "abs": (x.XNNAbs, lambda t, v: v.abs(), None),
    "sin": (x.XNNSin, lambda t, v: v.sin(), None),
    "cos": (x.XNNCos, lambda t, v: v.cos(), None),
    "tanh": (x.XNNTanh, lambda t, v: v.tanh(), None),
    "hardswish": (x.XNNHardswish, lambda t, v: t.nn.functional.hardswish(v), None),
    "gelu": (x.XNNGelu, lambda t, v: t.nn.functional.gelu(v), None),
    "softmax": (x.XNNSoftmax, lambda t, v: v.softmax(-1), None),
    "copy": (x.XNNCopy, lambda t, v: v, None),
}


def _unary_case(name, cls, fn, rng):
    @case(name)
    def _(b):
        i, o = b.input(2, 3, 7), b.output(2, 3, 7)
        b.node(cls(i, o))
        lo, hi = rng or (-4.0, 4.0)
        return [rand(2, 3, 7, lo=lo, hi=hi)], {}, lambda torch, ins: [fn(torch, ins[0])]


for _name, (_cls, _fn, _rng) in _UN.items():
    _unary_case(_name, _cls, _fn, _rng)


@case("clamp")
def _(b):
    i, o = b.input(3, 8), b.output(3, 8)
    b.node(x.XNNClamp(i, o), x.OutputMinMax(-1.0, 0.5))
    return [rand(3, 8)], {}, lambda torch, ins: [ins[0].clamp(-1.0, 0.5)]


@case("leaky_relu")
def _(b):
    i, o = b.input(3, 8), b.output(3, 8)
    b.node(x.XNNLeakyReLU(0.125, i, o))
    return [rand(3, 8)], {}, lambda torch, ins: [
        torch.nn.functional.leaky_relu(ins[0], 0.125)]


@case("elu")
def _(b):
    i, o = b.input(3, 8), b.output(3, 8)
    b.node(x.XNNELU(1.5, i, o))
    return [rand(3, 8)], {}, lambda torch, ins: [torch.nn.functional.elu(ins[0], 1.5)]


# ---- layout -----------------------------------------------------------------------------


@case("transpose_to_nhwc")
def _(b):
    i, o = b.input(2, 3, 4, 5), b.output(2, 4, 5, 3)
    b.node(x.XNNStaticTranspose(4, [0, 2, 3, 1], i, o))
    return [rand(2, 3, 4, 5)], {}, lambda torch, ins: [ins[0].permute(0, 2, 3, 1)]


@case("transpose_3d")
def _(b):
    i, o = b.input(2, 3, 4), b.output(4, 2, 3)
    b.node(x.XNNStaticTranspose(3, [2, 0, 1], i, o))
    return [rand(2, 3, 4)], {}, lambda torch, ins: [ins[0].permute(2, 0, 1)]


@case("reshape_inferred_dim")
def _(b):
    i, o = b.input(2, 3, 4), b.output(6, 4)
    b.node(x.XNNStaticReshape(2, [0, 4], i, o))
    return [rand(2, 3, 4)], {}, lambda torch, ins: [ins[0].reshape(6, 4)]


@case("slice")
def _(b):
    i, o = b.input(4, 6, 5), b.output(2, 3, 5)
    b.node(x.XNNStaticSlice(3, [1, 2, 0], [2, 3, 5], i, o))
    return [rand(4, 6, 5)], {}, lambda torch, ins: [ins[0][1:3, 2:5, :]]


@case("constant_pad")
def _(b):
    i, o = b.input(1, 3, 4, 2), b.output(1, 6, 5, 2)
    b.node(x.XNNStaticConstantPad([0, 1, 0, 0], [0, 2, 1, 0], 1.5, i, o))
    return [rand(1, 3, 4, 2)], {}, lambda torch, ins: [
        torch.nn.functional.pad(ins[0], (0, 0, 0, 1, 1, 2), value=1.5)]


def _cat_case(n, axis):
    cls = {2: x.XNNConcatenate2, 3: x.XNNConcatenate3, 4: x.XNNConcatenate4,
           5: x.XNNConcatenate5}[n]

    @case(f"concatenate{n}_axis{axis}")
    def _(b):
        shapes = []
        for k in range(n):
            s = [2, 3, 4]
            s[axis] = k + 1
            shapes.append(s)
        ins = [b.input(*s) for s in shapes]
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        o = b.output(*out)
        ids = ins + [0] * (5 - n)
        b.node(cls(axis, ids[0], ids[1], ids[2], ids[3], o, 0, ids[4]))
        return [rand(*s) for s in shapes], {}, lambda torch, t: [torch.cat(t, axis)]


for _n, _axis in ((2, 0), (3, 2), (4, 1), (5, 2)):
    _cat_case(_n, _axis)


def _resize_case(align):
    @case(f"resize_bilinear{'_align_corners' if align else ''}")
    def _(b):
        i, o = b.input(1, 4, 5, 3), b.output(1, 7, 9, 3)
        b.node(x.XNNStaticResizeBilinear2D(7, 9, i, o, x.XNN_FLAG_ALIGN_CORNERS if align else 0))
        return [rand(1, 4, 5, 3)], {}, lambda torch, ins: [nhwc(torch.nn.functional.interpolate(
            nchw(ins[0]), size=(7, 9), mode="bilinear", align_corners=align))]


_resize_case(False)
_resize_case(True)


# ---- GEMM -------------------------------------------------------------------------------


def _fc_case(name, *, bias=True, transposed=False, batch=(3,), clamp=False, const=True):
    @case(f"fully_connected_{name}")
    def _(b):
        w = rand(5, 4)  # [out, in]
        bs = rand(5)
        i = b.input(*batch, 4)
        stored = w.T.copy() if transposed else w
        f = b.const(stored) if const else b.input(*stored.shape)
        bi = b.const(bs) if bias else INVALID
        o = b.output(*batch, 5)
        b.node(x.XNNFullyConnected(i, f, bi, o, x.XNN_FLAG_TRANSPOSE_WEIGHTS if transposed else 0),
               x.OutputMinMax(0.0, 1.0) if clamp else None)
        inputs = [rand(*batch, 4)] + ([] if const else [stored])

        def ref(torch, ins):
            r = torch.nn.functional.linear(ins[0], torch.from_numpy(w),
                                           torch.from_numpy(bs) if bias else None)
            return [r.clamp(0, 1) if clamp else r]
        return inputs, {}, ref


_fc_case("bias")
_fc_case("no_bias", bias=False)
_fc_case("transposed_weights", transposed=True)
_fc_case("3d_input_clamped", batch=(2, 3), clamp=True)
_fc_case("dynamic_filter", const=False, transposed=True, bias=False)


def _bmm_case(transpose_b):
    @case(f"batch_matrix_multiply{'_transpose_b' if transpose_b else ''}")
    def _(b):
        i1 = b.input(2, 3, 4)
        i2 = b.input(2, 5, 4) if transpose_b else b.input(2, 4, 5)
        o = b.output(2, 3, 5)
        b.node(x.XNNBatchMatrixMultiply(i1, i2, o, x.XNN_FLAG_TRANSPOSE_B if transpose_b else 0))
        rhs = rand(2, 5, 4) if transpose_b else rand(2, 4, 5)
        return [rand(2, 3, 4), rhs], {}, lambda torch, t: [
            t[0] @ (t[1].transpose(1, 2) if transpose_b else t[1])]


_bmm_case(False)
_bmm_case(True)

# ---- convolution ------------------------------------------------------------------------


def _conv_case(name, *, cin=4, cout=6, k=(3, 3), stride=(1, 1), pad=(1, 1, 1, 1),
               dil=(1, 1), groups=1, hw=(7, 8), bias=True, clamp=False):
    @case(f"conv2d_{name}")
    def _(b):
        cg, og = cin // groups, cout // groups
        w = rand(cout, cg, *k, lo=-0.5, hi=0.5)  # torch layout
        bs = rand(cout)
        top, right, bottom, left = pad
        n = 2
        i = b.input(n, *hw, cin)
        f = b.const(w.transpose(0, 2, 3, 1))
        bi = b.const(bs) if bias else INVALID
        oh = (hw[0] + top + bottom - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
        ow = (hw[1] + left + right - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
        o = b.output(n, oh, ow, cout)
        b.node(x.XNNConv2d(top, right, bottom, left, *k, *stride, *dil, cg, og, groups, 0, 0,
                           i, f, bi, o), x.OutputMinMax(0.0, 6.0) if clamp else None)

        def ref(torch, ins):
            xp = torch.nn.functional.pad(nchw(ins[0]), (left, right, top, bottom))
            r = torch.nn.functional.conv2d(xp, torch.from_numpy(w),
                                           torch.from_numpy(bs) if bias else None,
                                           stride, 0, dil, groups)
            r = nhwc(r)
            return [r.clamp(0, 6) if clamp else r]
        return [rand(n, *hw, cin)], {}, ref


_conv_case("3x3")
_conv_case("1x1_no_bias", k=(1, 1), pad=(0, 0, 0, 0), bias=False)
_conv_case("strided_asymmetric_padding", stride=(2, 2), pad=(0, 1, 2, 1), clamp=True)
_conv_case("dilated", k=(3, 2), dil=(2, 3), pad=(2, 0, 1, 1))
_conv_case("grouped", groups=2, cin=4, cout=6, stride=(2, 1))


def _depthwise_case(name, *, c=4, mult=1, k=(3, 3), stride=(1, 1), pad=(1, 1, 1, 1),
                    dil=(1, 1), hw=(6, 7)):
    @case(f"depthwise_conv2d_{name}")
    def _(b):
        w = rand(c * mult, 1, *k, lo=-0.5, hi=0.5)  # torch layout
        bs = rand(c * mult)
        top, right, bottom, left = pad
        i = b.input(1, *hw, c)
        f = b.const(w[:, 0].transpose(1, 2, 0)[None])  # [1, KH, KW, C*M]
        bi = b.const(bs)
        oh = (hw[0] + top + bottom - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
        ow = (hw[1] + left + right - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
        o = b.output(1, oh, ow, c * mult)
        b.node(x.XNNDepthwiseConv2d(top, right, bottom, left, *k, *stride, *dil, 1, mult, c, 0, 0,
                                    i, f, bi, o))

        def ref(torch, ins):
            xp = torch.nn.functional.pad(nchw(ins[0]), (left, right, top, bottom))
            return [nhwc(torch.nn.functional.conv2d(xp, torch.from_numpy(w),
                                                    torch.from_numpy(bs), stride, 0, dil, c))]
        return [rand(1, *hw, c)], {}, ref


_depthwise_case("3x3")
_depthwise_case("strided", stride=(2, 2), pad=(0, 1, 1, 0))
_depthwise_case("multiplier2_dilated", mult=2, dil=(2, 1), pad=(2, 1, 2, 1))


def _deconv_case(name, *, cin=4, cout=6, k=(3, 3), stride=(2, 2), pad=(1, 1, 1, 1),
                 adj=(0, 0), dil=(1, 1), groups=1, hw=(4, 5)):
    @case(f"conv_transpose2d_{name}")
    def _(b):
        cg, og = cin // groups, cout // groups
        w = rand(cin, og, *k, lo=-0.5, hi=0.5)  # torch layout [Cin, Cout/G, KH, KW]
        bs = rand(cout)
        top, right, bottom, left = pad
        assert top == bottom and left == right
        # XNNPACK: [G*Og, KH, KW, Cg], element [g*Og + j, :, :, c] = w[g*Cg + c, j]
        filt = w.reshape(groups, cg, og, *k).transpose(0, 2, 3, 4, 1).reshape(cout, *k, cg)
        i = b.input(1, *hw, cin)
        f = b.const(filt)
        bi = b.const(bs)
        oh = (hw[0] - 1) * stride[0] + dil[0] * (k[0] - 1) + 1 - top - bottom + adj[0]
        ow = (hw[1] - 1) * stride[1] + dil[1] * (k[1] - 1) + 1 - left - right + adj[1]
        o = b.output(1, oh, ow, cout)
        b.node(x.XNNConvTranspose2d(top, right, bottom, left, *k, *stride, *dil, cg, og, groups,
                                    *adj, i, f, bi, o))

        def ref(torch, ins):
            return [nhwc(torch.nn.functional.conv_transpose2d(
                nchw(ins[0]), torch.from_numpy(w), torch.from_numpy(bs), stride, (top, left),
                adj, groups, dil))]
        return [rand(1, *hw, cin)], {}, ref


_deconv_case("stride2")
_deconv_case("adjusted_grouped", adj=(1, 1), groups=2, pad=(0, 1, 0, 1))
_deconv_case("dilated_no_padding", stride=(1, 2), dil=(2, 1), pad=(0, 0, 0, 0), k=(2, 3))

# ---- pooling ----------------------------------------------------------------------------


def _pool_case(kind, name, *, k=(3, 3), stride=(2, 2), pad=(1, 1), dil=(1, 1), hw=(7, 8)):
    cls = x.XNNMaxPooling2d if kind == "max" else x.XNNAvgPooling2d

    @case(f"{kind}_pool2d_{name}")
    def _(b):
        i = b.input(2, *hw, 3)
        oh = (hw[0] + 2 * pad[0] - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
        ow = (hw[1] + 2 * pad[1] - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
        o = b.output(2, oh, ow, 3)
        d = dil if kind == "max" else (0, 0)  # ExecuTorch writes 0 ("unused") for average
        b.node(cls(pad[0], pad[1], pad[0], pad[1], *k, *stride, *d, i, o, x.XNN_FLAG_KEEP_DIMS))

        def ref(torch, ins):
            F = torch.nn.functional
            if kind == "max":
                r = F.max_pool2d(nchw(ins[0]), k, stride, pad, dil)
            else:
                r = F.avg_pool2d(nchw(ins[0]), k, stride, pad, count_include_pad=False)
            return [nhwc(r)]
        return [rand(2, *hw, 3)], {}, ref


_pool_case("max", "3x3_s2_p1")
_pool_case("max", "dilated", dil=(2, 2), stride=(1, 1))
_pool_case("avg", "3x3_s1_p1_excludes_padding", stride=(1, 1))
_pool_case("avg", "2x2_s2", k=(2, 2), pad=(0, 0))


def _gap_case(keep):
    @case(f"global_avg_pool2d{'_keep_dims' if keep else ''}")
    def _(b):
        i = b.input(2, 5, 6, 3)
        o = b.output(2, 1, 1, 3) if keep else b.output(2, 3)
        b.node(x.XNNGlobalAvgPooling2d(i, o, x.XNN_FLAG_KEEP_DIMS if keep else 0))
        return [rand(2, 5, 6, 3)], {}, lambda torch, ins: [
            ins[0].mean(dim=(1, 2), keepdim=keep)]


_gap_case(True)
_gap_case(False)


@case("argmax_pool2d_over_height")
def _(b):
    """What ExecuTorch lowers ``max.dim(x, 2, keepdim=True)`` to (int64 indices)."""
    i = b.input(1, 5, 4, 3)
    v, k = b.output(1, 1, 4, 3), b.output(1, 1, 4, 3, dtype=np.int64)
    b.node(x.XNNArgMaxPooling2d(0, 0, 0, 0, 5, 1, i, v, k))
    return [rand(1, 5, 4, 3)], {}, lambda torch, ins: list(ins[0].max(dim=1, keepdim=True))


@case("argmax_pool2d_2x2")
def _(b):
    i = b.input(2, 4, 6, 3)
    v, k = b.output(2, 2, 3, 3), b.output(2, 2, 3, 3, dtype=np.int64)
    b.node(x.XNNArgMaxPooling2d(0, 0, 0, 0, 2, 2, i, v, k))

    def ref(torch, ins):
        values, flat = torch.nn.functional.max_pool2d(nchw(ins[0]), 2, return_indices=True)
        h, w = flat // 6, flat % 6  # XNNPACK numbers window cells column-major
        return [nhwc(values), nhwc((w % 2) * 2 + h % 2)]
    return [rand(2, 4, 6, 3)], {}, ref


@case("conv2d_tensorflow_same_padding")
def _(b):
    w, bs = rand(5, 3, 3, 3, lo=-0.5, hi=0.5), rand(5)
    i, f, bi = b.input(1, 7, 8, 3), b.const(w.transpose(0, 2, 3, 1)), b.const(bs)
    o = b.output(1, 4, 4, 5)
    b.node(x.XNNConv2d(0, 0, 0, 0, 3, 3, 2, 2, 1, 1, 3, 5, 1, 0, 0, i, f, bi, o,
                       x.XNN_FLAG_TENSORFLOW_SAME_PADDING))

    def ref(torch, ins):  # SAME: 2 rows (1 top, 1 bottom), 1 column (right)
        xp = torch.nn.functional.pad(nchw(ins[0]), (0, 1, 1, 1))
        return [nhwc(torch.nn.functional.conv2d(xp, torch.from_numpy(w), torch.from_numpy(bs),
                                                2))]
    return [rand(1, 7, 8, 3)], {}, ref
