"""Quantized XNNPACK nodes, one crafted graph each, against a float64 NumPy reference
(dequantize, compute, quantize with round-half-even): static int8 results must be within one
output step and mostly equal; dynamic ones within a small fraction of the output range. Torch-free.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from xnn_qhelpers import (
    INVALID,
    QGraphBuilder,
    compile_graph,
    dequantize_ref,
    out_range,
    quantize_ref,
    run_graph,
    sym_weights,
)

from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.runtime import backend as R
from edgetorch.backends.xnnpack.runtime import kernels_quant as Q

IN_SCALE, IN_ZP = 0.02, 3


def _grid_input(rng, shape, scale=IN_SCALE, zp=IN_ZP):
    """Float inputs exactly on the int8 grid, so the input convert is exact."""
    q = rng.integers(-128, 128, size=shape)
    return q, ((q - zp) * np.float32(scale)).astype(np.float32)


def _static(b: QGraphBuilder, in_shape, out_shape, node_fn, out_q, mm=None):
    """fp32 in -> convert -> qint8 -> node -> qint8 -> convert -> fp32 out."""
    i = b.input(*in_shape)
    qi = b.qint8(*in_shape, scale=IN_SCALE, zp=IN_ZP)
    b.node(x.XNNConvert(i, qi))
    qo = b.qint8(*out_shape, scale=out_q[0], zp=out_q[1])
    b.node(node_fn(qi, qo), mm)
    o = b.output(*out_shape)
    b.node(x.XNNConvert(qo, o))


def _check_static(out: np.ndarray, ref: np.ndarray, out_q, min_equal=0.9):
    scale, zp = out_q
    ours = np.rint(out / np.float32(scale)) + zp
    want = quantize_ref(ref, scale, zp)
    diff = np.abs(ours - want)
    assert diff.max() <= 1, f"off by {diff.max()} steps"
    assert np.mean(diff == 0) >= min_equal


def test_convert_round_trip_is_round_half_even():
    b = QGraphBuilder()
    i = b.input(1, 8)
    q = b.qint8(1, 8, scale=0.5, zp=-2)
    o = b.output(1, 8)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNConvert(q, o))
    v = np.array([[0.25, 0.75, -0.25, 1.25, 100.0, -100.0, 0.0, 0.5]], np.float32)
    (out,) = run_graph(b, v)
    # v / 0.5 = .5, 1.5, -.5, 2.5 round to even: 0, 2, -0, 2; clamped ends; then +zp
    want = (np.clip(np.array([0, 2, 0, 2, 200, -200, 0, 1]) - 2, -128, 127) + 2) * 0.5
    np.testing.assert_array_equal(out[0], want.astype(np.float32))


@pytest.mark.parametrize("transposed", [False, True])
def test_static_fully_connected_per_channel(transposed):
    rng = np.random.default_rng(0)
    qx, xv = _grid_input(rng, (3, 40))
    w, ws = sym_weights(rng, (16, 40))
    bias_f = rng.normal(0, 0.3, 16)
    bias_q = np.rint(bias_f / (IN_SCALE * ws.astype(np.float64))).astype(np.int32)
    ref = dequantize_ref(qx, IN_SCALE, IN_ZP) @ (w * ws[:, None].astype(np.float64)).T
    ref = ref + bias_q * (IN_SCALE * ws.astype(np.float64))
    out_q = out_range(ref)
    b = QGraphBuilder()
    wid = (b.per_channel(np.ascontiguousarray(w.T), ws, channel_dim=1) if transposed
           else b.per_channel(w, ws))
    bid = b.per_channel(bias_q, IN_SCALE * ws, dtype=x.XNNDatatype.xnn_datatype_qcint32)
    _static(b, (3, 40), (3, 16), lambda i, o: x.XNNFullyConnected(
        i, wid, bid, o, x.XNN_FLAG_TRANSPOSE_WEIGHTS if transposed else 0), out_q)
    (out,) = run_graph(b, xv)
    _check_static(out, ref, out_q)


def test_static_fully_connected_per_tensor_relu_clamp():
    rng = np.random.default_rng(1)
    qx, xv = _grid_input(rng, (2, 24))
    w = rng.integers(-127, 128, (8, 24)).astype(np.int8)
    ref = np.maximum(dequantize_ref(qx, IN_SCALE, IN_ZP) @ (w * 0.01).T, 0)
    out_q = out_range(ref)
    b = QGraphBuilder()
    wid = b.per_tensor_const(w, 0.01, 0)
    _static(b, (2, 24), (2, 8), lambda i, o: x.XNNFullyConnected(i, wid, INVALID, o), out_q,
            x.OutputMinMax(0.0, math.inf))
    (out,) = run_graph(b, xv)
    assert out.min() >= 0
    _check_static(out, ref, out_q)


def _conv_ref(xf, w, stride, pad, groups):
    """NCHW-free direct convolution in float64: x [N,H,W,C], w [O,KH,KW,Cg]."""
    n, h, wd, c = xf.shape
    o, kh, kw, cg = w.shape
    xp = np.pad(xf, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oh, ow, o))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, i : i + stride * oh : stride, j : j + stride * ow : stride,
                           g * cg : (g + 1) * cg]
                out[..., oc] += patch @ w[oc, i, j]
    return out


@pytest.mark.parametrize("groups,stride", [(1, 1), (2, 2)])
def test_static_conv2d(groups, stride):
    rng = np.random.default_rng(2)
    qx, xv = _grid_input(rng, (1, 7, 7, 4))
    w, ws = sym_weights(rng, (6, 3, 3, 4 // groups))
    bias_q = rng.integers(-500, 500, 6).astype(np.int32)
    wf = w * ws[:, None, None, None].astype(np.float64)
    ref = _conv_ref(dequantize_ref(qx, IN_SCALE, IN_ZP), wf, stride, 1, groups)
    ref += bias_q * IN_SCALE * ws.astype(np.float64)
    oh = (7 + 2 - 3) // stride + 1
    out_q = out_range(ref)
    b = QGraphBuilder()
    wid = b.per_channel(w, ws)
    bid = b.per_channel(bias_q, IN_SCALE * ws, dtype=x.XNNDatatype.xnn_datatype_qcint32)
    _static(b, (1, 7, 7, 4), (1, oh, oh, 6), lambda i, o: x.XNNConv2d(
        1, 1, 1, 1, 3, 3, stride, stride, 1, 1, 4 // groups, 6 // groups, groups, 0, 0,
        i, wid, bid, o), out_q)
    (out,) = run_graph(b, xv)
    _check_static(out, ref, out_q)


def test_static_depthwise_conv2d():
    rng = np.random.default_rng(3)
    qx, xv = _grid_input(rng, (1, 6, 6, 5))
    w, ws = sym_weights(rng, (1, 3, 3, 5), axis=3)
    wf = w * ws.astype(np.float64)
    ref = _conv_ref(dequantize_ref(qx, IN_SCALE, IN_ZP), np.transpose(wf, (3, 1, 2, 0)), 1,
                    1, 5)
    out_q = out_range(ref)
    b = QGraphBuilder()
    wid = b.per_channel(w, ws, channel_dim=3)
    _static(b, (1, 6, 6, 5), (1, 6, 6, 5), lambda i, o: x.XNNDepthwiseConv2d(
        1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 5, 0, 0, i, wid, INVALID, o), out_q)
    (out,) = run_graph(b, xv)
    _check_static(out, ref, out_q)


@pytest.mark.parametrize("node", [x.XNNAdd, x.XNNSubtract, x.XNNMultiply])
def test_static_add_and_multiply_broadcast(node):
    rng = np.random.default_rng(4)
    qa, av = _grid_input(rng, (2, 3, 4))
    qb = rng.integers(-128, 128, (1, 3, 1))
    bv = ((qb - -5) * np.float32(0.05)).astype(np.float32)
    fa, fb = dequantize_ref(qa, IN_SCALE, IN_ZP), dequantize_ref(qb, 0.05, -5)
    ref = {x.XNNAdd: fa + fb, x.XNNSubtract: fa - fb, x.XNNMultiply: fa * fb}[node]
    out_q = out_range(ref)
    b = QGraphBuilder()
    i1, i2 = b.input(2, 3, 4), b.input(1, 3, 1)
    q1, q2 = b.qint8(2, 3, 4, scale=IN_SCALE, zp=IN_ZP), b.qint8(1, 3, 1, scale=0.05, zp=-5)
    qo = b.qint8(2, 3, 4, scale=out_q[0], zp=out_q[1])
    o = b.output(2, 3, 4)
    b.node(x.XNNConvert(i1, q1))
    b.node(x.XNNConvert(i2, q2))
    b.node(node(q1, q2, qo))
    b.node(x.XNNConvert(qo, o))
    (out,) = run_graph(b, av, bv)
    _check_static(out, ref, out_q, min_equal=0.95)


def test_static_add_matches_xnnpack_fixed_point():
    """The fixed-point add, element by element, against its definition in XNNPACK."""
    a = np.arange(-128, 128, dtype=np.int8)
    b = a[::-1].copy()
    got = Q.add(a, b, 0.02, 3, 0.05, -5, 0.06, 1)
    sa, sb = np.float32(0.02) / np.float32(0.06), np.float32(0.05) / np.float32(0.06)
    shift = 20 - (int(np.float32(max(sa, sb)).view(np.uint32) >> 23) - 127)
    ma, mb = round(float(sa) * 2**shift), round(float(sb) * 2**shift)
    acc = (1 << (shift - 1)) - ma * 3 - mb * -5 + a.astype(np.int64) * ma + b.astype(np.int64) * mb
    np.testing.assert_array_equal(got, np.clip((acc >> shift) + 1, -128, 127))


def test_static_max_pool_and_global_average_pool():
    rng = np.random.default_rng(5)
    qx, xv = _grid_input(rng, (1, 4, 4, 3))
    b = QGraphBuilder()
    i = b.input(1, 4, 4, 3)
    q = b.qint8(1, 4, 4, 3, scale=IN_SCALE, zp=IN_ZP)
    mp = b.qint8(1, 2, 2, 3, scale=IN_SCALE, zp=IN_ZP)
    gp = b.qint8(1, 1, 1, 3, scale=0.01, zp=-7)
    o1, o2 = b.output(1, 2, 2, 3), b.output(1, 1, 1, 3)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNMaxPooling2d(0, 0, 0, 0, 2, 2, 2, 2, 1, 1, q, mp))
    b.node(x.XNNGlobalAvgPooling2d(q, gp, x.XNN_FLAG_KEEP_DIMS))
    b.node(x.XNNConvert(mp, o1))
    b.node(x.XNNConvert(gp, o2))
    out1, out2 = run_graph(b, xv)
    xf = dequantize_ref(qx, IN_SCALE, IN_ZP)
    np.testing.assert_allclose(out1, xf.reshape(1, 2, 2, 2, 2, 3).max(axis=(2, 4)), atol=1e-6)
    _check_static(out2, xf.mean(axis=(1, 2), keepdims=True), (0.01, -7), min_equal=1.0)


def test_concatenate_requantizes_inputs_with_other_parameters():
    rng = np.random.default_rng(6)
    qa, av = _grid_input(rng, (2, 3))
    qb = rng.integers(-128, 128, (2, 2))
    bv = ((qb - 0) * np.float32(0.01)).astype(np.float32)
    b = QGraphBuilder()
    i1, i2 = b.input(2, 3), b.input(2, 2)
    q1, q2 = b.qint8(2, 3, scale=IN_SCALE, zp=IN_ZP), b.qint8(2, 2, scale=0.01, zp=0)
    qo = b.qint8(2, 5, scale=IN_SCALE, zp=IN_ZP)
    o = b.output(2, 5)
    b.node(x.XNNConvert(i1, q1))
    b.node(x.XNNConvert(i2, q2))
    b.node(x.XNNConcatenate2(1, q1, q2, INVALID, INVALID, qo))
    b.node(x.XNNConvert(qo, o))
    (out,) = run_graph(b, av, bv)
    ref = np.concatenate([dequantize_ref(qa, IN_SCALE, IN_ZP), dequantize_ref(qb, 0.01, 0)], 1)
    # half of the second input's values fall on a tie of the coarser grid
    _check_static(out, ref, (IN_SCALE, IN_ZP), min_equal=0.5)
    np.testing.assert_array_equal(out[:, :3], av)


def test_quantized_clamp_and_layout_nodes():
    rng = np.random.default_rng(7)
    qx, xv = _grid_input(rng, (2, 3, 4))
    b = QGraphBuilder()
    i = b.input(2, 3, 4)
    q = b.qint8(2, 3, 4, scale=IN_SCALE, zp=IN_ZP)
    t = b.qint8(4, 3, 2, scale=IN_SCALE, zp=IN_ZP)
    c = b.qint8(4, 3, 2, scale=IN_SCALE, zp=IN_ZP)
    r = b.qint8(4, 6, scale=IN_SCALE, zp=IN_ZP)
    o = b.output(4, 6)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNStaticTranspose(3, [2, 1, 0], q, t))
    b.node(x.XNNClamp(t, c), x.OutputMinMax(-0.5, 1.0))
    b.node(x.XNNStaticReshape(2, [4, 6], c, r))
    b.node(x.XNNConvert(r, o))
    (out,) = run_graph(b, xv)
    ref = np.clip(dequantize_ref(qx, IN_SCALE, IN_ZP).transpose(2, 1, 0), -0.5, 1.0)
    _check_static(out, ref.reshape(4, 6), (IN_SCALE, IN_ZP), min_equal=1.0)


def test_dynamic_quantization_parameters_follow_xnnpack():
    x_ = np.array([[-1.0, 0.5, 2.0], [0.1, 0.2, 0.3], [0.0, 0.0, 0.0]], np.float32)
    d = Q.quantize_dynamic(x_, 1)
    # row 0: range [-1, 2] -> multiplier 85, zero point from the min side: -128 + 85 = -43
    assert d.zero_point[0] == -43 and np.isclose(d.scale[0], 3 / 255)
    assert d.zero_point[1] == -128  # range [0, 0.3]: zero at the bottom
    assert d.scale[2] == 1 and d.zero_point[2] == 127  # all zero: XNNPACK takes the max side
    err = np.abs(dequantize_ref(d.q, d.scale[:, None], d.zero_point[:, None]) - x_)
    assert np.all(err <= d.scale[:, None] / 2 + 1e-7)


def _dynamic_graph(b, rows, k, n, wid, bid):
    i = b.input(rows, k)
    q = b.qdint8(rows, k)
    o = b.output(rows, n)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNFullyConnected(q, wid, bid, o))


def test_dynamic_fully_connected_qcint8():
    rng = np.random.default_rng(8)
    xv = rng.normal(size=(4, 48)).astype(np.float32)
    w, ws = sym_weights(rng, (10, 48))
    bias = rng.normal(size=10).astype(np.float32)
    b = QGraphBuilder()
    _dynamic_graph(b, 4, 48, 10, b.per_channel(w, ws), b.const(bias))
    (out,) = run_graph(b, xv)
    d = Q.quantize_dynamic(xv, 1)
    xq = dequantize_ref(d.q, d.scale[:, None], d.zero_point[:, None])
    ref = xq @ (w * ws[:, None].astype(np.float64)).T + bias
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    exact = xv.astype(np.float64) @ (w * ws[:, None].astype(np.float64)).T + bias
    assert np.abs(out - exact).max() <= 0.01 * np.ptp(exact)


def test_dynamic_fully_connected_qbint4_nibble_order_and_bf16_scales():
    rng = np.random.default_rng(9)
    w = rng.integers(-8, 8, size=(6, 64)).astype(np.int8)
    scales = rng.uniform(0.01, 0.1, size=(6, 2)).astype(np.float32)
    bf16 = ((scales.view(np.uint32) >> 16) << 16).view(np.float32)  # what is stored
    xv = rng.normal(size=(3, 64)).astype(np.float32)
    b = QGraphBuilder()
    _dynamic_graph(b, 3, 64, 6, b.qbint4(w, scales, 32), INVALID)
    (out,) = run_graph(b, xv)
    wf = (w.reshape(6, 2, 32) * bf16[:, :, None].astype(np.float64)).reshape(6, 64)
    d = Q.quantize_dynamic(xv, 1)
    ref = dequantize_ref(d.q, d.scale[:, None], d.zero_point[:, None]) @ wf.T
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # the nibble order, directly: low nibble = even input channel
    packed = np.array([[0x9F]], np.uint8)  # low 0xF -> 7, high 0x9 -> 1
    np.testing.assert_array_equal(Q.unpack_int4(packed, 1, 2), [[7, 1]])


def test_dynamic_conv2d_per_image():
    rng = np.random.default_rng(10)
    xv = rng.normal(size=(2, 5, 5, 3)).astype(np.float32)
    w, ws = sym_weights(rng, (4, 3, 3, 3))
    b = QGraphBuilder()
    i = b.input(2, 5, 5, 3)
    q = b.qdint8(2, 5, 5, 3, nnb=3)
    o = b.output(2, 5, 5, 4)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNConv2d(1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 3, 4, 1, 0, 0, q, b.per_channel(w, ws),
                       INVALID, o), x.OutputMinMax(0.0, math.inf))
    (out,) = run_graph(b, xv)
    d = Q.quantize_dynamic(xv, 3)
    xq = dequantize_ref(d.q, d.scale[:, None, None, None], d.zero_point[:, None, None, None])
    ref = np.maximum(_conv_ref(xq, w * ws[:, None, None, None].astype(np.float64), 1, 1, 1), 0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_static_depthwise_multiplier_and_transposed_conv():
    """Depth multiplier 2 and a stride-2 transposed convolution, against the float kernels
    (themselves tested against torch) on dequantized values."""
    from edgetorch.kernels.conv import nhwc

    rng = np.random.default_rng(11)
    qx, xv = _grid_input(rng, (1, 4, 4, 2))
    xf = dequantize_ref(qx, IN_SCALE, IN_ZP)
    dw, dws = sym_weights(rng, (1, 3, 3, 4), axis=3)
    win = nhwc.Window(3, 3, pad_top=1, pad_right=1, pad_bottom=1, pad_left=1)
    ref_dw = nhwc.depthwise_conv2d(xf, dw * dws.astype(np.float64), None, win, 2)
    tw, tws = sym_weights(rng, (3, 2, 2, 2))
    ref_t = nhwc.deconv2d(xf, tw * tws[:, None, None, None].astype(np.float64), None,
                       nhwc.Window(2, 2, 2, 2), 1, 0, 0)
    for ref, make in [
        (ref_dw, lambda b, i, o: x.XNNDepthwiseConv2d(
            1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 2, 2, 0, 0, i, b.per_channel(dw, dws, 3),
            INVALID, o)),
        (ref_t, lambda b, i, o: x.XNNConvTranspose2d(
            0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 2, 3, 1, 0, 0, i, b.per_channel(tw, tws), INVALID,
            o)),
    ]:
        out_q = out_range(ref)
        b = QGraphBuilder()
        _static(b, (1, 4, 4, 2), ref.shape, lambda i, o, b=b, make=make: make(b, i, o), out_q)
        (out,) = run_graph(b, xv)
        _check_static(out, ref, out_q)


def test_quantized_unary_and_pad_use_the_reference_path():
    rng = np.random.default_rng(12)
    qx, xv = _grid_input(rng, (2, 5))
    b = QGraphBuilder()
    i = b.input(2, 5)
    q = b.qint8(2, 5, scale=IN_SCALE, zp=IN_ZP)
    s = b.qint8(2, 5, scale=1 / 256, zp=-128)
    p = b.qint8(2, 7, scale=1 / 256, zp=-128)
    o = b.output(2, 7)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNSigmoid(q, s))
    b.node(x.XNNStaticConstantPad([0, 1], [0, 1], 0.25, s, p))
    b.node(x.XNNConvert(p, o))
    (out,) = run_graph(b, xv)
    sig = 1 / (1 + np.exp(-dequantize_ref(qx, IN_SCALE, IN_ZP)))
    ref = np.pad(sig, ((0, 0), (1, 1)), constant_values=0.25)
    _check_static(out, ref, (1 / 256, -128), min_equal=0.9)


def test_dynamic_fully_connected_flattens_3d_input_per_token():
    rng = np.random.default_rng(13)
    xv = rng.normal(size=(2, 3, 32)).astype(np.float32)
    w, ws = sym_weights(rng, (5, 32))
    b = QGraphBuilder()
    i = b.input(2, 3, 32)
    q = b.qdint8(2, 3, 32)
    o = b.output(6, 5)
    b.node(x.XNNConvert(i, q))
    b.node(x.XNNFullyConnected(q, b.per_channel(w, ws), INVALID, o,
                               x.XNN_FLAG_TENSORFLOW_RESHAPE_2D))
    (out,) = run_graph(b, xv)
    d = Q.quantize_dynamic(xv.reshape(6, 32), 1)  # per token, so flattening first is the same
    ref = dequantize_ref(d.q, d.scale[:, None], d.zero_point[:, None]) @ (
        w * ws[:, None].astype(np.float64)).T
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lo,hi,folds", [(0.0, 6.0, 1), (-0.3, 0.4, 1), (5.0, 6.0, 0)])
def test_static_clamp_folded_into_conv_gives_the_same_int8(lo, hi, folds, monkeypatch):
    """A clamp whose input only it reads is folded into the convolution's requantization
    (intersected int8 bounds, no second pass); the result equals running it separately,
    which happens when the conv output is also read elsewhere (here: a graph output) or
    when the two ranges are disjoint (then two clips are not one)."""
    rng = np.random.default_rng(11)
    qx, xv = _grid_input(rng, (1, 6, 6, 4))
    w, ws = sym_weights(rng, (5, 3, 3, 4))
    bias_q = rng.integers(-500, 500, 5).astype(np.int32)
    folded = []

    def spy(nodes, ctx, external):
        fused, clamps = fold(nodes, ctx, external)
        folded.append(len(clamps))
        return fused, clamps
    fold = R.fold_clamps
    monkeypatch.setattr(R, "fold_clamps", spy)
    outs = []
    for also_output in (False, True):
        b = QGraphBuilder()
        wid = b.per_channel(w, ws)
        bid = b.per_channel(bias_q, IN_SCALE * ws, dtype=x.XNNDatatype.xnn_datatype_qcint32)
        i = b.input(1, 6, 6, 4)
        qi = b.qint8(1, 6, 6, 4, scale=IN_SCALE, zp=IN_ZP)
        qc = b.qint8(1, 6, 6, 5, scale=0.02, zp=-3)
        qr = b.qint8(1, 6, 6, 5, scale=0.02, zp=-3)
        b.node(x.XNNConvert(i, qi))
        b.node(x.XNNConv2d(1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 4, 5, 1, 0, 0, qi, wid, bid, qc),
               x.OutputMinMax(-1.0, 2.5))
        b.node(x.XNNClamp(qc, qr), x.OutputMinMax(lo, hi))
        o = b.output(1, 6, 6, 5)
        b.node(x.XNNConvert(qr, o))
        if also_output:
            o2 = b.output(1, 6, 6, 5)
            b.node(x.XNNConvert(qc, o2))
        compile_graph(b)
        outs.append(run_graph(b, xv)[0])
    assert folded == [folds, folds, 0, 0]  # (compile, run) alone, then with a second reader
    np.testing.assert_array_equal(outs[0], outs[1])
    if folds:
        assert outs[0].min() >= max(lo, -1.0) - 0.02 and outs[0].max() <= min(hi, 2.5) + 0.02
