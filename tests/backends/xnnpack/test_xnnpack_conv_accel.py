"""The XNNPACK convolutions' compiled paths (``accel``, numba) against eager PyTorch and
against their NumPy paths (``accel.disabled()``): depthwise (strides, dilations, depth
multipliers, asymmetric padding, the fused output clamp, int8 accumulators exact, a lowered
MobileNetV2-style block), Winograd transforms (bit-identical) and the GEMM epilogue."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from reduction_tolerance import (  # tests/support
    abs_magnitude,
    assert_within,
    sum_error_bound,
    winograd_error_bound,
)
from torch import nn

import edgetorch.backends.xnnpack  # noqa: F401  (registers the runtime backend)
from edgetorch.backends.xnnpack import XnnpackPartitioner
from edgetorch.backends.xnnpack.runtime import kernels as K
from edgetorch.backends.xnnpack.runtime import kernels_quant as Q
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.kernels import accel
from edgetorch.kernels.conv import nhwc
from edgetorch.runtime import Runtime

pytest.importorskip("numba")


def _eager_dw(x, filt, bias, win, mult, lo, hi):
    """Eager depthwise conv2d of NHWC ``x`` with a ``[1, KH, KW, C*M]`` filter, NHWC out."""
    c = x.shape[3]
    xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
    xt = nn.functional.pad(xt, (win.pad_left, win.pad_right, win.pad_top, win.pad_bottom))
    wt = torch.from_numpy(filt[0].transpose(2, 0, 1)[:, None].copy())  # [C*M, 1, KH, KW]
    bt = None if bias is None else torch.from_numpy(bias)
    y = nn.functional.conv2d(xt, wt, bt, (win.sh, win.sw), 0, (win.dh, win.dw), c)
    return torch.clamp(y, lo, hi).numpy().transpose(0, 2, 3, 1)


CASES = [  # (k, stride, dilation, (top, right, bottom, left), multiplier, channels)
    (3, 1, 1, (1, 1, 1, 1), 1, 32),
    (3, 2, 1, (1, 1, 1, 1), 1, 24),
    (3, 2, 1, (0, 1, 1, 0), 1, 16),  # TensorFlow SAME padding of an even input
    (3, 1, 2, (2, 2, 2, 2), 1, 8),
    (5, 1, 1, (2, 2, 2, 2), 1, 12),
    (5, 2, 1, (1, 2, 3, 0), 1, 7),
    (3, 1, 1, (1, 1, 1, 1), 2, 6),
    (1, 1, 1, (0, 0, 0, 0), 1, 10),  # a lone BatchNorm lowered as a 1x1 depthwise conv
    (3, 3, 1, (0, 0, 0, 0), 1, 5),
]


@pytest.mark.parametrize("k,stride,dil,pad,mult,c", CASES)
@pytest.mark.parametrize("clamp", [(-math.inf, math.inf), (0.0, 6.0)])
def test_compiled_depthwise_matches_eager_and_numpy(k, stride, dil, pad, mult, c, clamp):
    rng = np.random.default_rng(k * 100 + stride * 10 + c)
    lo, hi = clamp
    filt = (rng.standard_normal((1, k, k, c * mult)) / k).astype(np.float32)
    bias = rng.standard_normal(c * mult, dtype=np.float32)
    top, right, bottom, left = pad
    win = nhwc.Window(k, k, stride, stride, dil, dil, top, right, bottom, left)
    scratch, numpy_scratch = nhwc.Scratch(), nhwc.Scratch()
    for seed in range(2):  # the second call reuses the first call's output buffer
        x = np.random.default_rng(seed).standard_normal((2, 11, 9, c), dtype=np.float32)
        with accel.enabled():
            got = nhwc.depthwise_conv2d(x, filt, bias, win, mult, scratch, True, lo, hi).copy()
        with accel.disabled():
            ref = nhwc.depthwise_conv2d(x, filt, bias, win, mult, numpy_scratch, True, lo, hi)
        want = _eager_dw(x, filt, bias, win, mult, lo, hi)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_compiled_depthwise_without_bias_and_nan():
    """No bias; NaN passes through the fused clamp as through the NumPy path's np.clip."""
    rng = np.random.default_rng(5)
    filt = rng.standard_normal((1, 3, 3, 16), dtype=np.float32)
    x = rng.standard_normal((1, 6, 6, 16), dtype=np.float32)
    x[0, 2, 3, 4] = np.nan
    win = nhwc.Window(3, 3, 1, 1, 1, 1, 1, 1, 1, 1)
    with accel.enabled():
        got = nhwc.depthwise_conv2d(x, filt, None, win, 1, None, False, 0.0, 6.0)
    with accel.disabled():
        ref = nhwc.depthwise_conv2d(x, filt, None, win, 1, None, False, 0.0, 6.0)
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.isnan(got).sum() == 9
    want = _eager_dw(x, filt, None, win, 1, 0.0, 6.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_compiled_depthwise_float64():
    rng = np.random.default_rng(6)
    filt = rng.standard_normal((1, 3, 3, 8))
    bias = rng.standard_normal(8)
    x = rng.standard_normal((1, 7, 7, 8))
    win = nhwc.Window(3, 3, 2, 2, 1, 1, 1, 1, 1, 1)
    with accel.enabled():
        got = nhwc.depthwise_conv2d(x, filt, bias, win, 1)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _eager_dw(x, filt, bias, win, 1, -math.inf, math.inf),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride", [1, 2])
def test_int8_depthwise_accumulators_exact_both_paths(stride):
    """The int8 path's centered integers in float32: any summation order is exact, so the
    compiled and NumPy accumulators both equal int64 arithmetic."""
    rng = np.random.default_rng(stride)
    c = 24
    filt = rng.integers(-127, 128, (1, 3, 3, c)).astype(np.float32)
    xp = rng.integers(-255, 256, (1, 10, 9, c)).astype(np.float32)  # already padded
    win = nhwc.Window(3, 3, stride, stride)
    oh, ow = win.out_size(10, 9)
    want = np.zeros((1, oh, ow, c), np.int64)
    for i in range(3):
        for j in range(3):
            tap = xp[:, i : i + (oh - 1) * stride + 1 : stride,
                     j : j + (ow - 1) * stride + 1 : stride].astype(np.int64)
            want += tap * filt[0, i, j].astype(np.int64)
    for mode in (accel.enabled, accel.disabled):
        with mode():
            acc = Q.conv_acc(xp, "dwconv", filt, win, c, (1,), nhwc.Scratch())
        assert np.array_equal(acc, want)


class _Block(nn.Module):
    """MobileNetV2's inverted residual: 1x1 expand, 3x3 depthwise, ReLU6s, 1x1 project."""

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.body = nn.Sequential(
            nn.Conv2d(8, 48, 1, bias=False), nn.BatchNorm2d(48), nn.ReLU6(),
            nn.Conv2d(48, 48, 3, stride, 1, groups=48, bias=False), nn.BatchNorm2d(48),
            nn.ReLU6(), nn.Conv2d(48, 8, 1, bias=False), nn.BatchNorm2d(8))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)

    def forward(self, x):
        y = self.body(x)
        return x + y if self.stride == 1 else y


@pytest.mark.parametrize("stride", [1, 2])
def test_lowered_block_compiled_and_numpy(stride):
    torch.manual_seed(stride)
    model = _Block(stride).eval()
    ex = (torch.randn(1, 8, 14, 14),)
    prog = to_edge_transform_and_lower(torch.export.export(model, ex),
                                       partitioner=[XnnpackPartitioner()]).to_executorch()
    for mode in (accel.enabled, accel.disabled):
        with mode():
            method = Runtime.get().load_program(prog.buffer).load_method("forward")
            for seed in range(2):
                x = torch.randn(1, 8, 14, 14, generator=torch.Generator().manual_seed(seed))
                got = method.execute([x.numpy()])[0]
                with torch.no_grad():
                    want = model(x).numpy()
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _eager_conv(x, filt, bias, stride, pad, lo, hi):
    w = torch.from_numpy(filt.transpose(0, 3, 1, 2).copy())
    y = nn.functional.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), w,
                             torch.from_numpy(bias), stride, pad)
    return torch.clamp(y, lo, hi).numpy().transpose(0, 2, 3, 1)


@pytest.mark.parametrize("hw", [(8, 8), (7, 9), (1, 1), (12, 5)])
@pytest.mark.parametrize("clamp", [(-math.inf, math.inf), (0.0, 6.0)])
def test_compiled_winograd_transforms_equal_numpy_bit_for_bit(hw, clamp):
    """The compiled Winograd transforms do the NumPy path's operations in its order: equal
    results, bias and clamp included, also on odd sizes (cropped edge tiles). (The GEMMs
    between them are compared below within float32 rounding: how a BLAS splits a GEMM's rows
    changes its last bits on some CPUs, e.g. OpenBLAS's Haswell kernels.)"""
    from edgetorch.kernels.conv import compiled as conv_accel
    from edgetorch.kernels.conv import winograd
    rng = np.random.default_rng(hw[0] * 10 + hw[1])
    cin, cout = 16, 24
    th, tw = winograd.tiles(*hw)
    xb = np.zeros((2, 2 * th + 2, 2 * tw + 2, cin), np.float32)
    xb[:, 1 : 1 + hw[0], 1 : 1 + hw[1]] = rng.standard_normal((2, *hw, cin))

    def buffer(role, shape, dtype):
        return np.empty(shape, dtype)
    ref_v = winograd.input_tiles_numpy(xb, buffer)  # (4, 4, N, TH, TW, C)
    got_v = np.empty((2, th, tw, 16, cin), np.float32)
    with accel.enabled():
        conv_accel.winograd_input(xb, got_v)
    assert np.array_equal(got_v, ref_v.reshape(16, 2, th, tw, cin).transpose(1, 2, 3, 0, 4))

    m = rng.standard_normal((2, th, tw, 16, cout), dtype=np.float32)  # tile-major
    bias = rng.standard_normal(cout, dtype=np.float32)
    got = np.empty((2, *hw, cout), np.float32)
    with accel.enabled():
        conv_accel.winograd_output(m, bias, got, *clamp)
    ref = winograd.output_tiles_numpy(
        np.ascontiguousarray(m.transpose(3, 0, 1, 2, 4)).reshape(4, 4, 2, th, tw, cout),
        buffer)[:, : hw[0], : hw[1]] + bias
    assert np.array_equal(got, np.clip(ref, *clamp))


@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("hw", [(8, 8), (7, 9), (1, 1), (12, 5)])
@pytest.mark.parametrize("clamp", [(-math.inf, math.inf), (0.0, 6.0)])
def test_compiled_winograd_equals_numpy_path_and_eager(hw, clamp, blocks, monkeypatch):
    """The compiled path (blocks of tile rows, forced to 1-2 rows with ``blocks``, a partial
    last block on odd sizes) against the NumPy path and eager PyTorch."""
    if blocks:
        from edgetorch.kernels.conv import dispatch
        tw = -(-hw[1] // 2)
        monkeypatch.setattr(dispatch, "THRESHOLDS", dataclasses.replace(
            dispatch.THRESHOLDS, winograd_block_bytes=2 * tw * 16 * (16 + 24) * 4 + 3,
            winograd_min_block_tiles=1))
    rng = np.random.default_rng(hw[0] * 10 + hw[1])
    cin, cout = 16, 24
    filt = (rng.standard_normal((cout, 3, 3, cin)) / 12).astype(np.float32)
    bias = rng.standard_normal(cout, dtype=np.float32)
    win = nhwc.Window(3, 3, pad_top=1, pad_right=1, pad_bottom=1, pad_left=1)
    u = nhwc.winograd_filter(filt)
    scratch, numpy_scratch = nhwc.Scratch(), nhwc.Scratch()
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((2, *hw, cin), dtype=np.float32)
        with accel.enabled():
            got = nhwc.conv2d_winograd(x, u, bias, win, scratch, *clamp).copy()
        with accel.disabled():
            ref = nhwc.conv2d_winograd(x, u, bias, win, numpy_scratch, *clamp)
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        ours = winograd_error_bound(xp, filt, bias)  # clamping never widens a difference
        assert_within(got, ref, 2 * ours)
        direct = abs_magnitude(nn.functional.conv2d, xp.transpose(0, 3, 1, 2),
                               filt.transpose(0, 3, 1, 2), bias).transpose(0, 2, 3, 1)
        assert_within(got, _eager_conv(x, filt, bias, 1, 1, *clamp),
                      ours + sum_error_bound(9 * cin + 1, direct))


@pytest.mark.parametrize("k,stride,groups", [(1, 1, 1), (3, 2, 1), (1, 1, 2)])
def test_compiled_gemm_epilogue_matches_eager(k, stride, groups):
    """Convolution by GEMM with the bias and clamp in one compiled pass."""
    rng = np.random.default_rng(k + stride)
    cin, cout = 8, 12
    filt = (rng.standard_normal((cout, k, k, cin // groups)) / k).astype(np.float32)
    bias = rng.standard_normal(cout, dtype=np.float32)
    pad = k // 2
    win = nhwc.Window(k, k, stride, stride, 1, 1, pad, pad, pad, pad)
    wmat = nhwc.conv_filter_matrix(filt, groups)
    x = rng.standard_normal((1, 9, 10, cin), dtype=np.float32)
    w = torch.from_numpy(filt.transpose(0, 3, 1, 2).copy())
    want = nn.functional.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), w,
                                torch.from_numpy(bias), stride, pad, 1, groups)
    want = torch.clamp(want, -1.0, 1.5).numpy().transpose(0, 2, 3, 1)
    for mode in (accel.enabled, accel.disabled):
        with mode():
            got = nhwc.conv2d(x, wmat, bias, win, groups, nhwc.Scratch(), -1.0, 1.5)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride,pad,izp,ozp,bounds", [
    (1, 1, -128, 3, (-128, 127)), (2, 1, 5, -7, (-128, 127)), (1, 0, 0, 0, (-100, 90)),
    (2, 2, 17, -128, (-128, 127)),
])
def test_int8_depthwise_compiled_equals_numpy_bit_for_bit(stride, pad, izp, ozp, bounds):
    """The compiled int8 depthwise loop (int8 in, requantized int8 out, per-channel scales)
    gives the NumPy path's exact bytes (centering, float32 taps, requantize_f32)."""
    rng = np.random.default_rng(stride * 7 + pad)
    c = 20
    filt = rng.integers(-127, 128, (1, 3, 3, c)).astype(np.float32)
    bias = rng.integers(-3000, 3000, c).astype(np.float32)
    scale = rng.uniform(1e-4, 4e-3, c).astype(np.float32)
    win = nhwc.Window(3, 3, stride, stride, 1, 1, pad, pad, pad, pad)
    split = Q.exact_splits(filt.reshape(-1, c), Q.input_absmax(izp), bias)
    assert len(split) == 2
    lo, hi = bounds
    for seed in range(2):
        x = np.random.default_rng(seed).integers(-128, 128, (2, 9, 11, c), dtype=np.int8)
        got = {}
        for mode in (accel.enabled, accel.disabled):
            with mode():
                got[mode] = Q.static_conv(x, izp, "dwconv", filt, win, c, (1,), bias, split,
                                          scale, ozp, lo, hi, nhwc.Scratch()).copy()
        assert got[accel.enabled].dtype == np.int8
        assert np.array_equal(got[accel.enabled], got[accel.disabled])
        # and both are the exact integer arithmetic, requantized
        xp = np.pad(x.astype(np.int64) - izp, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        oh, ow = win.out_size(9, 11)
        acc = np.zeros((2, oh, ow, c), np.int64)
        for i in range(3):
            for j in range(3):
                acc += xp[:, i : i + (oh - 1) * stride + 1 : stride,
                          j : j + (ow - 1) * stride + 1 : stride] * filt[0, i, j].astype(np.int64)
        want = Q.requantize((acc + bias.astype(np.int64)).astype(np.float64), scale, ozp, lo, hi)
        assert np.array_equal(got[accel.enabled], want)


@pytest.mark.parametrize("k,groups", [(1, 1), (3, 1), (3, 2)])
def test_int8_conv_compiled_requantization_equals_numpy_bit_for_bit(k, groups):
    """The compiled bias + requantization epilogue of int8 convolution and fully connected
    layers gives the NumPy passes' bytes."""
    rng = np.random.default_rng(k + groups)
    cin, o, izp, ozp = 16, 12, -3, 9
    filt = rng.integers(-127, 128, (o, k, k, cin // groups)).astype(np.float32)
    bias = rng.integers(-4000, 4000, o).astype(np.float32)
    scale = rng.uniform(1e-4, 2e-3, o).astype(np.float32)
    win = nhwc.Window(k, k, 1, 1, 1, 1, k // 2, k // 2, k // 2, k // 2)
    w = nhwc.conv_filter_matrix(filt, groups)
    wk = w if groups == 1 else w.transpose(1, 0, 2).reshape(w.shape[1], -1)
    split = Q.exact_splits(wk, Q.input_absmax(izp), bias)
    x = rng.integers(-128, 128, (1, 7, 6, cin), dtype=np.int8)
    got = {}
    for mode in (accel.enabled, accel.disabled):
        with mode():
            got[mode] = (Q.static_conv(x, izp, "conv", w, win, groups, (), bias, split, scale,
                                       ozp, -120, 127, nhwc.Scratch()).copy(),
                         Q.static_fc(x.reshape(-1, cin), izp, filt.reshape(o, -1)[:, :cin].T
                                     .copy(), bias, [0, cin], scale, ozp, -128, 100,
                                     nhwc.Scratch()).copy())
    for a, b in zip(got[accel.enabled], got[accel.disabled]):
        assert a.dtype == np.int8 and np.array_equal(a, b)


@pytest.mark.parametrize("k,stride,dil,pad", [(3, 2, 1, (1, 1, 1, 1)), (2, 2, 1, (0, 0, 0, 0)),
                                              (3, 1, 2, (2, 2, 2, 2)), (3, 2, 1, (0, 1, 1, 0))])
def test_compiled_max_pool_matches_eager_and_numpy(k, stride, dil, pad):
    """The compiled max pool (one pass) against eager max_pool2d and the NumPy taps,
    including a NaN (it wins, as np.maximum lets it) and a reused output buffer."""
    top, right, bottom, left = pad
    win = nhwc.Window(k, k, stride, stride, dil, dil, top, right, bottom, left)
    scratch, numpy_scratch = nhwc.Scratch(), nhwc.Scratch()
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((2, 11, 9, 5), dtype=np.float32)
        x[1, 4, 4, 2] = np.nan
        got = K.max_pool2d(x, win, scratch).copy()
        with accel.disabled():
            ref = K.max_pool2d(x, win, numpy_scratch)
        xt = nn.functional.pad(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()),
                               (left, right, top, bottom), value=-math.inf)
        want = nn.functional.max_pool2d(xt, k, stride, 0, dil).numpy().transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, ref)
        assert np.isnan(got).any()


@pytest.mark.parametrize("k", [(3, 3), (1, 3), (3, 1), (5, 5)])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dil", [1, 2])
def test_compiled_depthwise_layouts_same_bits_and_near_float64(k, stride, dil):
    """The channels-last loop (3x3 interior pixels summed in a register) and the
    channels-first one (column phases for strides) make the same operations in the same
    order -- bias, taps in (row, column) order, clamp -- so they give the same bits, on
    inputs small enough that every pixel is a border pixel and on larger ones; both within
    float32 rounding of a float64 sum."""
    from edgetorch.kernels.conv import compiled as CA

    rng = np.random.default_rng(7)
    for h, w, pad in [(1, 2, (0, 0)), (5, 4, (1, 0)), (12, 11, (1, 2)), (17, 20, (2, 1))]:
        c = 9
        x = rng.standard_normal((2, h, w, c)).astype(np.float32)
        f = rng.standard_normal((*k, c)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        oh = (h + 2 * pad[0] - dil * (k[0] - 1) - 1) // stride + 1
        ow = (w + 2 * pad[1] - dil * (k[1] - 1) - 1) // stride + 1
        if oh < 1 or ow < 1:
            continue
        last = np.empty((2, oh, ow, c), np.float32)
        CA.depthwise_nhwc(x, f, b, last, pad, (stride, stride), (dil, dil), -1.5, 2.0)
        first = np.empty((2, c, oh, ow), np.float32)
        CA.depthwise_nchw(x.transpose(0, 3, 1, 2), f.transpose(2, 0, 1), b, first, pad,
                          (stride, stride), (dil, dil), -1.5, 2.0)
        np.testing.assert_array_equal(first.transpose(0, 2, 3, 1), last)
        xt = torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float64))
        wt = torch.from_numpy(f.transpose(2, 0, 1)[:, None].astype(np.float64))
        ref = nn.functional.conv2d(xt, wt, torch.from_numpy(b.astype(np.float64)), stride,
                                   pad, dil, c).clamp(-1.5, 2.0).numpy().transpose(0, 2, 3, 1)
        np.testing.assert_allclose(last, ref, rtol=1e-5, atol=1e-5)
