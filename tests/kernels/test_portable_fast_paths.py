"""The portable kernels' fast paths against eager PyTorch: convolution written straight into
``out`` through reused padding/im2col buffers, depthwise convolution on flattened planes
(stride by phase split), max-pool indices by arithmetic, BatchNorm in place, and a
Conv-BN-ReLU network run repeatedly with different inputs."""

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

from edgetorch.exir import to_edge
from edgetorch.kernels import accel, get_kernel
from edgetorch.kernels.conv import dispatch
from edgetorch.kernels.portable import nn as pnn
from edgetorch.kernels.portable import pooling
from edgetorch.runtime import Runtime


def _conv(x, w, b, stride, pad, dil, groups):
    out = np.full((x.shape[0], w.shape[0]) + tuple(
        (n + 2 * p - d * (k - 1) - 1) // s + 1
        for n, k, s, p, d in zip(x.shape[2:], w.shape[2:], stride, pad, dil)), np.nan, np.float32)
    res = pnn.convolution_out(x, w, b, stride, pad, dil, False, [0] * len(stride), groups, out)
    return res, out


@pytest.mark.parametrize("cin,cout,groups,k,stride,pad,dil", [
    (6, 6, 6, 3, [1, 1], [1, 1], [1, 1]),  # depthwise, flat planes
    (6, 6, 6, 3, [2, 2], [1, 1], [1, 1]),  # depthwise, stride by phases
    (4, 4, 4, 5, [1, 1], [2, 2], [2, 2]),  # depthwise, dilated
    (3, 3, 3, 3, [2, 2], [1, 1], [2, 2]),  # depthwise, strided and dilated (tap loop)
    (5, 7, 1, 3, [1, 1], [1, 1], [1, 1]),
    (5, 7, 1, 1, [1, 1], [0, 0], [1, 1]),  # 1x1: the input itself is the GEMM operand
    (5, 8, 1, 1, [2, 2], [0, 0], [1, 1]),
    (6, 4, 2, 3, [2, 1], [1, 2], [1, 1]),  # grouped
])
@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_conv_into_out_with_reused_buffers(cin, cout, groups, k, stride, pad, dil, blocked,
                                           nhwc, compiled, monkeypatch):
    """NumPy paths, and with ``compiled`` the accel extra's depthwise loops (NCHW on large
    planes at stride 1, channels-last otherwise: ``nhwc`` moves the boundary)."""
    if compiled:
        pytest.importorskip("numba")
    with accel.enabled() if compiled else accel.disabled():
        _conv_into_out(cin, cout, groups, k, stride, pad, dil, blocked, nhwc, monkeypatch)


def _conv_into_out(cin, cout, groups, k, stride, pad, dil, blocked, nhwc, monkeypatch):
    t = dispatch.THRESHOLDS
    if blocked:  # large depthwise layers run in blocks of channels: force blocks of 1-2
        t = dataclasses.replace(t, depthwise_whole_max=0, depthwise_block=150)
    # small planes run depthwise channels-last; planes: flattened (the large-plane path)
    t = dataclasses.replace(t, depthwise_channels_last_max_plane=1 << 30 if nhwc else 0)
    monkeypatch.setattr(dispatch, "THRESHOLDS", t)
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cout, cin // groups, k, k)) / k).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    for shape in [(1, cin, 11, 9), (1, cin, 11, 9), (2, cin, 8, 10)]:
        x = rng.standard_normal(shape).astype(np.float32)
        res, out = _conv(x, w, b, stride, pad, dil, groups)
        assert res is out  # written in place, nothing left for finish to copy
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                          torch.from_numpy(b), stride, pad, dil, groups)
        np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-5)


def test_max_pool_indices_match_eager_with_ties_nan_and_inf():
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(120):
        x = rng.integers(-2, 3, (1, 2, int(rng.integers(3, 9)), int(rng.integers(3, 9))))
        x = x.astype(np.float32)  # small integers: many ties
        m = rng.random(x.shape)
        x[m < 0.1], x[(m >= 0.1) & (m < 0.2)] = np.nan, -np.inf
        k, s = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        p, d = int(rng.integers(0, k // 2 + 1)), (int(rng.integers(1, 3)) if s == 1 else 1)
        ceil = bool(rng.integers(0, 2))
        try:
            v, i = torch.nn.functional.max_pool2d(torch.from_numpy(x), k, s, p, d,
                                                  ceil_mode=ceil, return_indices=True)
        except RuntimeError:
            continue
        out, idx = np.empty(v.shape, np.float32), np.empty(v.shape, np.int64)
        pooling.max_pool2d_with_indices_out(x, [k, k], [s, s], [p, p], [d, d], ceil, out, idx)
        np.testing.assert_array_equal(out, v.numpy())
        np.testing.assert_array_equal(idx, i.numpy())
        checked += 1
    assert checked > 50


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
            nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.BatchNorm2d(8), nn.Hardtanh(0, 6),
            nn.Conv2d(8, 4, 1))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)

    def forward(self, x):
        return self.body(x)


def test_portable_conv_net_twice_with_different_inputs():
    torch.manual_seed(0)
    model = _Net().eval()
    prog = to_edge(torch.export.export(model, (torch.randn(1, 3, 16, 16),))).to_executorch()
    method = Runtime.get().load_program(prog.buffer).load_method("forward")
    results = []
    for seed in range(3):
        x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(seed))
        got = method.execute([x.numpy()])[0]
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        results.append((got, want))
    for got, want in results:  # outputs are the caller's, never rewritten by later calls
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hw,pad", [((10, 10), [1, 1]), ((7, 9), [1, 0]), ((5, 6), [0, 0])])
def test_winograd_conv_matches_eager_and_caches_only_constants(hw, pad):
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((24, 16, 3, 3)) * np.sqrt(2 / 144)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    frozen = np.frombuffer(w.tobytes(), np.float32).reshape(w.shape)  # like a .pte constant
    mutable = w.copy()
    for weight in (frozen, frozen, mutable):
        x = rng.standard_normal((1, 16, *hw)).astype(np.float32)
        res, out = _conv(x, weight, b, [1, 1], pad, [1, 1], 1)
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w.copy()),
                                          torch.from_numpy(b), 1, pad)
        assert_within(out, want.numpy(), _winograd_vs_eager_bound(x, w, b, pad))
    mutable *= 2  # a mutable weight is never served from the packed-weight cache
    x = rng.standard_normal((1, 16, *hw)).astype(np.float32)
    _, out = _conv(x, mutable, None, [1, 1], pad, [1, 1], 1)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(2 * w), None, 1, pad)
    assert_within(out, want.numpy(), _winograd_vs_eager_bound(x, 2 * w, None, pad))


def _winograd_vs_eager_bound(x_nchw, w_oihw, b, pad):
    """Ours (Winograd) and eager's (a direct sum) each within their own rounding bound, NCHW."""
    xp = np.pad(x_nchw, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    direct = abs_magnitude(torch.nn.functional.conv2d, xp, w_oihw, b)
    k = int(np.prod(w_oihw.shape[1:])) + (b is not None)
    ours = winograd_error_bound(xp.transpose(0, 2, 3, 1), w_oihw.transpose(0, 2, 3, 1), b)
    return ours.transpose(0, 3, 1, 2) + sum_error_bound(k, direct)


def test_winograd_filter_packed_once_for_a_read_only_mapped_constant(tmp_path):
    """A program mapped from its file gives constants whose base is a read-only mmap: their
    Winograd filters are packed once, not per call (a mapping opened for writing is not
    immutable, so it is never cached)."""
    import mmap

    from edgetorch.kernels.conv import winograd

    w = np.arange(16 * 16 * 9, dtype=np.float32).reshape(16, 16, 3, 3)
    path = tmp_path / "w.bin"
    path.write_bytes(w.tobytes())
    calls = []

    def derive(a):
        calls.append(1)
        return a * 2

    with open(path, "rb") as f:
        ro = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    const = np.frombuffer(ro, np.float32).reshape(w.shape)
    first = winograd.constant_cache(const, "test", derive)
    assert winograd.constant_cache(const, "test", derive) is first and len(calls) == 1
    with open(path, "r+b") as f:
        rw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE)
    writable = np.frombuffer(rw, np.float32).reshape(w.shape)
    writable.flags.writeable = False  # a read-only view of writable memory
    winograd.constant_cache(writable, "test", derive)
    winograd.constant_cache(writable, "test", derive)
    assert len(calls) == 3
    del const, first, writable


@pytest.mark.parametrize("op,dims,keepdim", [
    ("aten::mean.out", [-1], True), ("aten::mean.out", [0, 2], False),
    ("aten::sum.IntList_out", [1], True), ("aten::sum.IntList_out", [0, 1, 2], False),
])
def test_float_reductions_add_in_index_order_as_executorch(op, dims, keepdim):
    """ExecuTorch's portable sum/mean accumulate one element after the other (float32); the
    last bits matter after dynamic quantization. Checked against a sequential accumulation,
    on data where NumPy's pairwise summation rounds differently."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 577, 5)) * 10).astype(np.float32)
    x[:, ::7] *= 1e4
    axes = tuple(d % 3 for d in dims)
    keep = [a for a in range(3) if a not in axes]
    rows = np.transpose(x, keep + list(axes)).reshape(int(np.prod([x.shape[a] for a in keep])), -1)
    seq = np.cumsum(rows, axis=1, dtype=np.float32)[:, -1]
    if op == "aten::mean.out":
        seq = seq / np.float32(rows.shape[1])
    shape = [1 if a in axes else x.shape[a] for a in range(3)] if keepdim else \
        [x.shape[a] for a in keep]
    want = seq.reshape(shape)
    args = [x, dims, keepdim, None]
    got = get_kernel(op).fn(*args, np.empty(want.shape, np.float32))
    np.testing.assert_array_equal(got, want)
    ref = torch.from_numpy(x).double()
    ref = (ref.mean if op == "aten::mean.out" else ref.sum)(dim=dims, keepdim=keepdim)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-3)
