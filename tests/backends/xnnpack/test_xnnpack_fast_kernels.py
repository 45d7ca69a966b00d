"""The XNNPACK backend's fast paths against eager PyTorch: Winograd 3x3 convolution, im2col
into reused buffers, depthwise taps against tiled filters, BatchNorm folded at preprocess,
and node buffers reused across calls with different inputs (results must not leak)."""

from __future__ import annotations

import dataclasses

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
from edgetorch.backends.xnnpack.runtime import kernels_quant as Q
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.kernels import accel
from edgetorch.kernels.conv import dispatch, nhwc
from edgetorch.kernels.conv.dispatch import Algorithm
from edgetorch.runtime import Runtime


def _nhwc(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy().transpose(0, 2, 3, 1).copy()


def _torch_conv(x, filt, bias, stride, pad, dil=1, groups=1):
    """Eager conv2d of NHWC ``x`` with an XNNPACK ``[O, KH, KW, Cg]`` filter, as NHWC."""
    w = torch.from_numpy(filt.transpose(0, 3, 1, 2).copy())
    b = None if bias is None else torch.from_numpy(bias)
    y = torch.nn.functional.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), w, b,
                                   stride, pad, dil, groups)
    return _nhwc(y)


def _layer_weights(rng, shape):
    """Weights scaled as a trained layer's (He: var 2/fan-in), so outputs stay O(1)."""
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)


@pytest.mark.parametrize("cin", [16, 64, 256])
def test_winograd_error_is_the_direct_gemms(cin):
    """Against a float64 reference, Winograd's float32 error stays of the order of the direct
    (im2col) GEMM's, even with unscaled weights where both exceed 1e-5."""
    rng = np.random.default_rng(cin)
    filt = rng.standard_normal((32, 3, 3, cin), dtype=np.float32)
    x = rng.standard_normal((1, 14, 14, cin), dtype=np.float32)
    win = nhwc.Window(3, 3, pad_top=1, pad_right=1, pad_bottom=1, pad_left=1)
    wino = nhwc.conv2d_winograd(x, nhwc.winograd_filter(filt), None, win)
    direct = nhwc.conv2d(x, nhwc.conv_filter_matrix(filt, 1), None, win, 1)
    exact = torch.nn.functional.conv2d(
        torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float64)),
        torch.from_numpy(filt.transpose(0, 3, 1, 2).astype(np.float64)), padding=1)
    exact = exact.numpy().transpose(0, 2, 3, 1)
    assert np.abs(wino - exact).max() <= 2 * np.abs(direct - exact).max()


@pytest.mark.parametrize("hw,cin,cout,pad", [((8, 8), 16, 24, 1), ((7, 9), 32, 16, 1),
                                             ((6, 5), 16, 16, 0), ((1, 1), 16, 16, 1),
                                             ((9, 8), 24, 32, (0, 1, 2, 1))])
def test_winograd_matches_eager(hw, cin, cout, pad):
    rng = np.random.default_rng(0)
    top, right, bottom, left = (pad,) * 4 if isinstance(pad, int) else pad
    win = nhwc.Window(3, 3, pad_top=top, pad_right=right, pad_bottom=bottom, pad_left=left)
    assert nhwc.choose(win, 1, cin, cout, None, True) is Algorithm.WINOGRAD
    filt = _layer_weights(rng, (cout, 3, 3, cin))
    bias = rng.standard_normal(cout, dtype=np.float32)
    u = nhwc.winograd_filter(filt)
    scratch = nhwc.Scratch()
    for seed in range(2):  # the second call reuses the first call's (dirty) buffers
        x = np.random.default_rng(seed + 1).standard_normal((2, *hw, cin), dtype=np.float32)
        got = nhwc.conv2d_winograd(x, u, bias, win, scratch)
        xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
        want = _torch_conv(xp, filt, bias, 1, 0)
        assert_within(got, want, _winograd_vs_eager_bound(xp, filt, bias))


def _direct_bound(xp_nhwc, filt, bias, stride=1, dil=1, groups=1):
    """Rounding bound of one float32 direct convolution of the padded NHWC input."""
    k = int(np.prod(filt.shape[1:])) + (bias is not None)
    magnitude = _nhwc(torch.from_numpy(abs_magnitude(
        lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride, 0, dil, groups),
        xp_nhwc.transpose(0, 3, 1, 2), filt.transpose(0, 3, 1, 2), bias)))
    return sum_error_bound(k, magnitude)


def _winograd_vs_eager_bound(xp_nhwc, filt, bias):
    """Ours (Winograd) and eager's (a direct sum) each within their own rounding bound."""
    return winograd_error_bound(xp_nhwc, filt, bias) + _direct_bound(xp_nhwc, filt, bias)


@pytest.mark.parametrize("k,stride,pad,dil", [(3, 2, 1, 1), (1, 1, 0, 1), (1, 2, 0, 1),
                                              (3, 1, 2, 2), (5, 1, 2, 1), (7, 2, 3, 1)])
def test_conv_im2col_reuses_buffers(k, stride, pad, dil):
    rng = np.random.default_rng(1)
    filt = _layer_weights(rng, (8, k, k, 5))
    bias = rng.standard_normal(8, dtype=np.float32)
    win = nhwc.Window(k, k, stride, stride, dil, dil, pad, pad, pad, pad)
    wmat = nhwc.conv_filter_matrix(filt, 1)
    scratch = nhwc.Scratch()
    for shape in [(1, 11, 10, 5), (1, 11, 10, 5), (2, 9, 12, 5)]:  # repeat, then a new shape
        x = rng.standard_normal(shape, dtype=np.float32)
        got = nhwc.conv2d(x, wmat, bias, win, 1, scratch).copy()
        np.testing.assert_allclose(got, _torch_conv(x, filt, bias, stride, pad, dil),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("stride,mult,dil", [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2)])
def test_depthwise_tiled_filter_reuse(stride, mult, dil, blocked, monkeypatch):
    if blocked:  # large layers run in blocks of rows: force blocks of 2-3 rows here
        monkeypatch.setattr(dispatch, "THRESHOLDS", dataclasses.replace(
            dispatch.THRESHOLDS, depthwise_whole_max=0, depthwise_block=2 * 10 * 6 * mult + 7))
    rng = np.random.default_rng(2)
    c = 6
    filt = rng.standard_normal((1, 3, 3, c * mult), dtype=np.float32)
    bias = rng.standard_normal(c * mult, dtype=np.float32)
    win = nhwc.Window(3, 3, stride, stride, dil, dil, 1, 1, 1, 1)
    scratch = nhwc.Scratch()
    torch_filt = filt[0].transpose(2, 0, 1)[:, None].copy()  # [C*M, 1, 3, 3]
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 9, 10, c), dtype=np.float32)
        with accel.disabled():  # the NumPy taps (test_xnnpack_conv_accel: compiled loops)
            got = nhwc.depthwise_conv2d(x, filt, bias, win, mult, scratch, constant_filter=True)
        want = torch.nn.functional.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()),
                                          torch.from_numpy(torch_filt), torch.from_numpy(bias),
                                          stride, 1, dil, c)
        np.testing.assert_allclose(got, _nhwc(want), rtol=1e-5, atol=1e-5)


def test_quantized_conv_acc_exact_with_reused_buffers():
    """Integer accumulators through the reused buffers stay exact (float64 sums of ints)."""
    rng = np.random.default_rng(3)
    filt = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.float64)
    win = nhwc.Window(3, 3, 1, 1, 1, 1, 1, 1, 1, 1)
    wmat = nhwc.conv_filter_matrix(filt, 1)
    scratch = nhwc.Scratch()
    for _ in range(2):
        x = rng.integers(-128, 128, (1, 6, 7, 3)).astype(np.float64)
        acc = Q.conv_acc(x, "conv", wmat, win, 1, (), scratch)
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        want = np.zeros((1, 6, 7, 4), np.int64)
        for i in range(3):
            for j in range(3):
                want += np.einsum("nhwc,oc->nhwo", xp[:, i:i + 6, j:j + 7].astype(np.int64),
                                  filt[:, i, j].astype(np.int64))
        assert np.array_equal(acc, want)


def _int_conv_ref(x, filt, pad, stride, groups):
    """Exact int64 accumulators of an NHWC convolution (padding contributes 0)."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    o, kh, kw, cg = filt.shape
    oh = (xp.shape[1] - kh) // stride + 1
    ow = (xp.shape[2] - kw) // stride + 1
    og = o // groups
    want = np.zeros((x.shape[0], oh, ow, o), np.int64)
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                tap = xp[:, i : i + (oh - 1) * stride + 1 : stride,
                         j : j + (ow - 1) * stride + 1 : stride, g * cg : (g + 1) * cg]
                want[..., g * og : (g + 1) * og] += np.einsum(
                    "nhwc,oc->nhwo", tap, filt[g * og : (g + 1) * og, i, j].astype(np.int64))
    return want


@pytest.mark.parametrize("cin,groups,split", [(8, 1, False), (600, 1, True), (8, 2, False)])
def test_static_int8_conv_float32_path_is_exact(cin, groups, split):
    """The float32 GEMM path of static int8 convolution equals exact integer arithmetic and
    the float64 requantization, also when the reduction must be split to stay below 2**24
    (a 3x3 filter over 600 channels of +-127 weights with a 255-wide input range)."""
    rng = np.random.default_rng(7)
    o, izp, ozp = 6, -128, 3
    filt = rng.integers(-127, 128, (o, 3, 3, cin // groups)).astype(np.float64)
    if split:
        filt[:, :, :, :] = np.where(filt >= 0, 127, -127)  # the worst case
    bias = rng.integers(-5000, 5000, o).astype(np.float64)
    win = nhwc.Window(3, 3, 2, 2, 1, 1, 1, 1, 1, 1)
    w = nhwc.conv_filter_matrix(filt, groups)
    wk = w if groups == 1 else w.transpose(1, 0, 2).reshape(w.shape[1], -1)
    bounds = Q.exact_splits(wk, Q.input_absmax(izp), bias)
    assert (len(bounds) > 2) == split
    for lo_k, hi_k in zip(bounds[:-1], bounds[1:]):  # every chunk's worst case is exact
        assert 255 * np.abs(wk[lo_k:hi_k]).sum(axis=0).max() < 2**24
    scale = rng.uniform(1e-6, 1e-4, o).astype(np.float32)
    scratch = nhwc.Scratch()
    for seed in range(2):
        x = np.random.default_rng(seed).integers(-128, 128, (1, 9, 8, cin), dtype=np.int8)
        got = Q.static_conv(x, izp, "conv", w.astype(np.float32), win, groups, (),
                            bias if split else bias.astype(np.float32), bounds, scale, ozp,
                            -128, 127, scratch)
        acc = _int_conv_ref(x.astype(np.int64) - izp, filt.astype(np.int64), 1, 2, groups)
        want = Q.requantize((acc + bias.astype(np.int64)).astype(np.float64), scale, ozp)
        assert np.array_equal(got, want)


class _ConvBNNet(nn.Module):
    """Conv-BN-ReLU6 (3x3 Winograd-eligible), depthwise-BN-ReLU6, 1x1 conv-BN, residual."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                               nn.ReLU6())
        self.b = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16,
                                         bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.c = nn.Sequential(nn.Conv2d(16, 16, 1, bias=False), nn.BatchNorm2d(16))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics to fold
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-1, 1)

    def forward(self, x):
        y = self.b(self.a(x))
        return y + self.c(y)


def test_lowered_conv_bn_net_twice_with_different_inputs():
    torch.manual_seed(0)
    model = _ConvBNNet().eval()
    ex = (torch.randn(1, 16, 12, 12),)
    prog = to_edge_transform_and_lower(torch.export.export(model, ex),
                                       partitioner=[XnnpackPartitioner()]).to_executorch()
    method = Runtime.get().load_program(prog.buffer).load_method("forward")
    graph = method._delegate_handles[0][1]
    kinds = " ".join(graph.descriptions)
    assert "BatchNorm" not in kinds and "XNNConv2d" in kinds  # BN folded into the convs
    outs = []
    for seed in range(3):
        x = torch.randn(1, 16, 12, 12, generator=torch.Generator().manual_seed(seed))
        got = method.execute([x.numpy()])[0]
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        outs.append((got, want))
    for got, want in outs:  # earlier outputs are not overwritten by later calls
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_winograd_only_with_enough_tiles():
    """Small feature maps (4x4: 4 output tiles) take the direct GEMM: Winograd's 16 filter
    matrices cost more to read than they save there; ResNet-18's 7x7x512 layers (16 tiles)
    are Winograd's."""
    win = nhwc.Window(3, 3, pad_top=1, pad_right=1, pad_bottom=1, pad_left=1)
    assert nhwc.choose(win, 1, 64, 64, (1, 56, 56, 64), True) is Algorithm.WINOGRAD
    assert nhwc.choose(win, 1, 256, 256, (1, 14, 14, 256), True) is Algorithm.WINOGRAD
    assert nhwc.choose(win, 1, 512, 512, (1, 7, 7, 512), True) is Algorithm.WINOGRAD
    assert nhwc.choose(win, 1, 512, 512, (1, 4, 4, 512), True) is not Algorithm.WINOGRAD
    assert nhwc.choose(win, 1, 512, 512, (1, 6, 6, 512), True) is not Algorithm.WINOGRAD  # 9 tiles
    assert nhwc.choose(win, 1, 512, 512, (4, 4, 4, 512), True) is Algorithm.WINOGRAD  # 4 images: 16 tiles
    assert nhwc.choose(win, 1, 512, 512, None, True) is Algorithm.WINOGRAD  # dims unknown: the shape-free rule


def test_workspace_shared_by_nodes_does_not_leak_results():
    """Convolutions of one graph share their temporaries (patch matrices, Winograd tiles):
    each node's result is its own, whatever ran before it with the same memory."""
    rng = np.random.default_rng(5)
    work = nhwc.Workspace()
    layers = []
    for k, stride, cin, cout, hw in [(3, 1, 16, 16, 12), (3, 2, 16, 24, 9), (3, 1, 24, 16, 5),
                                     (5, 1, 3, 16, 12), (3, 1, 16, 16, 13)]:
        filt = _layer_weights(rng, (cout, k, k, cin))
        win = nhwc.Window(k, k, stride, stride, 1, 1, k // 2, k // 2, k // 2, k // 2)
        layers.append((filt, win, stride, k // 2, cin, hw, nhwc.Scratch()))
    for _ in range(2):
        outs = []
        for filt, win, stride, pad, cin, hw, scratch in layers:
            x = rng.standard_normal((1, hw, hw, cin), dtype=np.float32)
            xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            bound = _direct_bound(xp, filt, None, stride)
            if nhwc.choose(win, 1, cin, filt.shape[0], x.shape, True) is Algorithm.WINOGRAD:
                got = nhwc.conv2d_winograd(x, nhwc.winograd_filter(filt), None, win, scratch,
                                        work=work)
                bound = bound + winograd_error_bound(xp, filt)
            else:
                got = nhwc.conv2d(x, nhwc.conv_filter_matrix(filt, 1), None, win, 1, scratch,
                               work=work)
                bound = 2 * bound
            outs.append((got, _torch_conv(x, filt, None, stride, pad), bound))
        for got, want, bound in outs:  # checked after all ran: later nodes did not overwrite them
            assert_within(got, want, bound)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("k,stride,pad", [(1, 1, 0), (3, 2, 1), (7, 2, 3), (3, 1, 1)])
def test_conv_in_blocks_of_rows_matches_eager(k, stride, pad, compiled, monkeypatch):
    """Large im2col convolutions run in blocks of output rows (patch rows, GEMM and bias +
    clamp per block): forced here to blocks of one row, 2 images (1x1: one GEMM)."""
    if compiled:
        pytest.importorskip("numba")
    # 1 output row a block: 6 patch rows of k*k*5 values and 6 x 8 results
    monkeypatch.setattr(dispatch, "THRESHOLDS", dataclasses.replace(
        dispatch.THRESHOLDS, gemm_block_bytes=2 * 6 * (8 + k * k * 5) * 4 - 1))
    rng = np.random.default_rng(k + stride)
    filt = _layer_weights(rng, (8, k, k, 5))
    bias = rng.standard_normal(8, dtype=np.float32)
    win = nhwc.Window(k, k, stride, stride, 1, 1, pad, pad, pad, pad)
    wmat = nhwc.conv_filter_matrix(filt, 1)
    scratch, work = nhwc.Scratch(), nhwc.Workspace()
    for shape in [(2, 11, 6 * stride, 5), (1, 7, 6 * stride, 5)]:
        x = rng.standard_normal(shape, dtype=np.float32)
        with accel.enabled() if compiled else accel.disabled():
            got = nhwc.conv2d(x, wmat, bias, win, 1, scratch, 0.0, 1.5, work).copy()
        want = np.clip(_torch_conv(x, filt, bias, stride, pad), 0.0, 1.5)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_sigmoid_matches_torch_with_and_without_compiled_loops(compiled):
    """XNNSigmoid: exp(-|x|) in compiled passes around NumPy's exp, or tanh in NumPy."""
    from edgetorch.backends.xnnpack.runtime.nodes import _sigmoid

    if compiled and not accel.available():
        pytest.skip("numba is not installed")
    x = (np.random.default_rng(7).standard_normal((8, 64)) * 20).astype(np.float32)
    x[0, :5] = [np.nan, np.inf, -np.inf, -0.0, 88.0]
    want = torch.sigmoid(torch.from_numpy(x)).numpy()
    with (accel.enabled() if compiled else accel.disabled()):
        fresh = _sigmoid(x)
        into = _sigmoid(x, np.full_like(x, 5.0))
        strided = _sigmoid(x[:, ::2])  # not contiguous: the NumPy passes
    assert np.array_equal(fresh, into, equal_nan=True)
    np.testing.assert_allclose(fresh, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(strided, want[:, ::2], rtol=1e-6, atol=1e-7)
