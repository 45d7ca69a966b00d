"""The static int8 XNNPACK kernels' compiled paths (``accel``, numba) against their NumPy
paths (``accel.disabled()``: the same bytes) and against the integer arithmetic they stand for
(torch's convolution and matmul of the integers in float64, exact): the fully connected node
(``StaticFC``), the convolution of one group (``blas_accel.q8_conv``), the converts, max and
global average pooling, and the fixed-point add."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgetorch.backends.xnnpack.runtime import kernels_quant as Q
from edgetorch.kernels import accel, blas_accel
from edgetorch.kernels.conv import nhwc

pytest.importorskip("numba")


def _both(fn):
    """``fn()`` with the compiled paths, then with the NumPy paths (copies of the results)."""
    with accel.enabled():
        fast = np.array(fn())
    with accel.disabled():
        slow = np.array(fn())
    return fast, slow


def _requantized(acc: np.ndarray, scale: np.ndarray, zp: int, lo: int, hi: int) -> np.ndarray:
    """XNNPACK's fp32 requantization of exact integer sums (float64 in, rounded once)."""
    f = acc.astype(np.float32) * scale
    return (np.rint(np.clip(f, np.float32(lo - zp), np.float32(hi - zp))) + zp).astype(np.int8)


@pytest.mark.parametrize("shape,k,o,bias,bounds", [
    ((1, 20), 20, 64, True, (-128, 127)),
    ((4, 784), 784, 16, True, (-20, 90)),
    ((2, 3, 48), 48, 10, False, (-128, 127)),
])
def test_static_fc_compiled_is_the_numpy_path_and_the_integer_product(shape, k, o, bias, bounds):
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    w = rng.integers(-127, 128, (k, o)).astype(np.float32)
    b = rng.integers(-5000, 5000, o).astype(np.float32) if bias else None
    scale = (rng.random(o) * 1e-4 + 1e-5).astype(np.float32)
    zp_in, zp_out, (lo, hi) = 7, -3, bounds
    splits = Q.exact_splits(w, Q.input_absmax(zp_in), b)
    assert len(splits) == 2  # (the compiled path's case)
    fc = Q.StaticFC(w, b, splits, scale, zp_in, zp_out, lo, hi, False)
    fast, slow = _both(lambda: fc(x))
    np.testing.assert_array_equal(fast, slow)
    acc = (torch.from_numpy(x.astype(np.float64) - zp_in) @ torch.from_numpy(w.astype(np.float64)))
    acc = acc.numpy() + (0 if b is None else b)
    np.testing.assert_array_equal(fast, _requantized(acc, scale, zp_out, lo, hi))
    out = np.empty_like(fast)
    with accel.enabled():
        assert fc(x, out=out) is out
    np.testing.assert_array_equal(out, fast)


@pytest.mark.parametrize("k,stride,pad,cin,cout,transposed_input", [
    (3, 1, (1, 1, 1, 1), 3, 16, True),  # a first layer: NCHW input viewed as NHWC
    (3, 2, (0, 1, 1, 0), 8, 12, False),  # TensorFlow SAME padding, stride 2
    (1, 1, (0, 0, 0, 0), 24, 32, False),  # pointwise
])
def test_static_conv_compiled_is_the_numpy_path_and_torch(k, stride, pad, cin, cout,
                                                          transposed_input):
    rng = np.random.default_rng(1)
    if transposed_input:
        x = rng.integers(-128, 128, (2, cin, 9, 10)).astype(np.int8).transpose(0, 2, 3, 1)
    else:
        x = rng.integers(-128, 128, (2, 9, 10, cin)).astype(np.int8)
    filt = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.float64)
    w = nhwc.conv_filter_matrix(filt, 1).astype(np.float32)
    b = rng.integers(-3000, 3000, cout).astype(np.float32)
    scale = np.ascontiguousarray((rng.random(cout) * 1e-4 + 1e-5).astype(np.float32))
    top, right, bottom, left = pad
    win = nhwc.Window(k, k, stride, stride, pad_top=top, pad_right=right, pad_bottom=bottom,
                      pad_left=left)
    zp_in, zp_out = -4, 5
    splits = Q.exact_splits(w, Q.input_absmax(zp_in), b)
    assert len(splits) == 2

    def run():
        return Q.static_conv(x, zp_in, "conv", w, win, 1, (), b, splits, scale, zp_out, -128,
                             127, nhwc.Scratch())
    fast, slow = _both(run)
    np.testing.assert_array_equal(fast, slow)
    xt = torch.from_numpy(x.astype(np.float64) - zp_in).permute(0, 3, 1, 2)
    xt = torch.nn.functional.pad(xt, (left, right, top, bottom))
    acc = torch.nn.functional.conv2d(xt, torch.from_numpy(filt).permute(0, 3, 1, 2),
                                     torch.from_numpy(b.astype(np.float64)), stride)
    want = _requantized(acc.permute(0, 2, 3, 1).numpy(), scale, zp_out, -128, 127)
    np.testing.assert_array_equal(fast, want)


def test_converts_compiled_are_the_numpy_paths():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 50)) * 4).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, 0.5, -0.5]  # (ties round to even)
    quantize = Q.Quantizer(0.03, -6)
    fast, slow = _both(lambda: quantize(x))
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast, Q.quantize(x, 0.03, -6))
    x[1, 3] = np.nan  # the NumPy path decides a NaN's value, whichever path runs
    with accel.enabled(), np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(quantize(x), Q.quantize(x, 0.03, -6))
    dequantize = Q.Dequantizer(0.03, -6, np.dtype(np.float32))
    out = np.empty(fast.shape, np.float32)
    assert dequantize(fast, out=out) is out
    np.testing.assert_array_equal(out, Q.dequantize(fast, 0.03, -6))


def test_max_pool_and_global_average_pool_compiled_are_the_numpy_paths():
    rng = np.random.default_rng(3)
    q = rng.integers(-128, 128, (2, 7, 6, 5)).astype(np.int8)
    win = nhwc.Window(3, 3, 2, 2, 1, 1, 1, 1, 1, 1)
    fast, slow = _both(lambda: Q.max_pool2d(q, win))
    np.testing.assert_array_equal(fast, slow)
    want = torch.nn.functional.max_pool2d(torch.from_numpy(q.astype(np.float32)).permute(
        0, 3, 1, 2), 3, 2, 1).permute(0, 2, 3, 1).numpy()
    np.testing.assert_array_equal(fast, want.astype(np.int8))
    for keep, (lo, hi) in ((True, (-128, 127)), (False, (-10, 30))):
        fast, slow = _both(lambda keep=keep, lo=lo, hi=hi: Q.mean(
            q, (1, 2), 0.05, 3, 0.02, -7, keep, lo, hi))
        np.testing.assert_array_equal(fast, slow)
        assert fast.shape == ((2, 1, 1, 5) if keep else (2, 5))


def test_add_compiled_is_the_numpy_path():
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (2, 9, 16)).astype(np.int8)
    b = rng.integers(-128, 128, (2, 9, 16)).astype(np.int8)
    for b_scale, (lo, hi) in ((0.05, (-128, 127)), (-0.05, (-30, 60))):  # (subtract: -scale)
        fast, slow = _both(lambda s=b_scale, lo=lo, hi=hi: Q.add(
            a, b, 0.02, 3, s, -5, 0.06, 1, lo, hi))
        np.testing.assert_array_equal(fast, slow)


def test_the_compiled_gemm_is_bound():
    """(The fully connected and convolution tests above ran the compiled calls.)"""
    with accel.enabled():
        assert blas_accel.ready()
