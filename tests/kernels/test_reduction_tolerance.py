"""The tolerance the tests use for float32 sums against torch (tests/support/reduction_tolerance):
two legitimate summation orders of a 256-term sum can differ far beyond a fixed 1e-5, and
stay within the bound derived from the arithmetic; a wrong result does not."""

import numpy as np
import pytest
from reduction_tolerance import (  # tests/support
    assert_close_reduction,
    assert_within,
    sum_error_bound,
    winograd_error_bound,
)


def _cancelling_sums():
    """64 sums of 256 terms: 128 values then the same values times -1.001 (large partial sums,
    small results), summed in order in float32 and exactly (rounded once)."""
    rng = np.random.default_rng(0)
    c = (rng.random((64, 128)) * 10).astype(np.float32)
    terms = np.concatenate([c, -c * np.float32(1.001)], axis=1)
    in_order = np.zeros(64, np.float32)
    for i in range(terms.shape[1]):
        in_order += terms[:, i]
    exact = terms.astype(np.float64).sum(axis=1)
    return in_order, exact.astype(np.float32), np.abs(terms).astype(np.float64).sum(axis=1)


def test_two_summation_orders_beyond_a_fixed_tolerance_are_within_the_bound():
    in_order, rounded_exact, magnitude = _cancelling_sums()
    with pytest.raises(AssertionError):  # what a fixed tolerance said about correct sums
        np.testing.assert_allclose(in_order, rounded_exact, rtol=1e-5, atol=1e-5)
    assert_close_reduction(in_order, rounded_exact, k=256, magnitude=magnitude)


def test_a_wrong_sum_is_caught():
    in_order, rounded_exact, magnitude = _cancelling_sums()
    wrong = rounded_exact.copy()
    wrong[7] += 3 * sum_error_bound(256, magnitude[7])  # beyond twice the bound
    with pytest.raises(AssertionError, match="1 of 64 elements"):
        assert_close_reduction(in_order, wrong, k=256, magnitude=magnitude)
    nan = rounded_exact.copy()
    nan[3] = np.nan
    with pytest.raises(AssertionError, match="NaN"):
        assert_within(in_order, nan, 1.0)


def test_the_bound_refuses_sums_too_long_for_it():
    with pytest.raises(ValueError):
        sum_error_bound(2**23, 1.0)


def test_winograd_bound_holds_against_float64():
    """Winograd F(2x2, 3x3) in float32 (the product's own kernel) within its bound of the exact
    convolution, on odd sizes (cropped edge tiles)."""
    from edgetorch.kernels.conv import winograd

    rng = np.random.default_rng(1)
    xb = np.zeros((1, 9, 8, 16), np.float32)  # outputs 7 x 6: 4 x 3 tiles, the last cropped
    xb[:, 1:-1, 1:-1] = rng.standard_normal((1, 7, 6, 16))
    filt = rng.standard_normal((8, 3, 3, 16)).astype(np.float32)
    th, tw = winograd.tiles(7, 6)
    padded = np.zeros((1, 2 * th + 2, 2 * tw + 2, 16), np.float32)
    padded[:, :9, :8] = xb
    got = winograd.conv_nhwc(padded, winograd.transform_filter(filt),
                             lambda role, shape, dtype: np.empty(shape, dtype), (7, 6))
    x64, f64 = xb.astype(np.float64), filt.astype(np.float64)
    exact = np.zeros((1, 7, 6, 8))
    for i in range(3):
        for j in range(3):
            exact += x64[:, i:i + 7, j:j + 6] @ f64[:, i, j].T
    bound = winograd_error_bound(xb, filt)
    assert_within(got, exact, bound)
    assert np.abs(got - exact).max() > 0  # float32 rounding happened: the check has teeth
