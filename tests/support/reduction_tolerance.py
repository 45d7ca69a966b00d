"""Tolerances for float32 sums compared with torch, derived from the arithmetic.

Two float32 evaluations of the same sum (ours and torch's BLAS, each in an order of its own)
differ by up to the sum of their rounding errors. For a sum of ``k`` terms whose absolute
values total ``magnitude``, any summation order (sequential, pairwise, blocked, with or
without FMA) is within ``gamma_k * magnitude`` of the exact sum, ``gamma_k = k u / (1 - k u)``
with ``u = 2**-24`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 3.1
and 3.5). A fixed ``atol=1e-5`` instead holds or fails with the machine's BLAS kernel: a
256-long dot product of N(0, 1) values has magnitude ~160 and a worst case near 5e-3.

``magnitude`` is the same computation on absolute values (``|x| @ |w|.T + |b|``, the
convolution of ``|x|`` by ``|w|``...), in float64: :func:`abs_magnitude` runs it.
"""

from __future__ import annotations

import numpy as np

U32 = float(np.finfo(np.float32).eps) / 2  # unit roundoff of float32, 2**-24


def sum_error_bound(k: int, magnitude) -> np.ndarray:
    """Worst-case |computed - exact| of one float32 evaluation of a ``k``-term sum whose terms'
    absolute values total ``magnitude`` (count a bias as one more term)."""
    if k * U32 >= 0.5:
        raise ValueError(f"a {k}-term float32 sum has no useful bound (k u >= 1/2)")
    return k * U32 / (1 - k * U32) * np.asarray(magnitude, np.float64)


def assert_within(actual, expected, bound, err_msg: str = "") -> None:
    """|actual - expected| <= bound elementwise (NaN where and only where expected is NaN)."""
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{err_msg} shapes {actual.shape} {expected.shape}"
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg=f"{err_msg} (NaN positions)")
    bound = np.broadcast_to(np.asarray(bound, np.float64), expected.shape)
    err = np.abs(actual - expected)
    bad = ~nan & ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), expected.shape)
        raise AssertionError(
            f"{err_msg} {int(bad.sum())} of {expected.size} elements beyond the float32 "
            f"rounding bound; worst at {tuple(int(j) for j in i)}: |{actual[i]} - "
            f"{expected[i]}| = {err[i]:.3g} > {bound[i]:.3g}")


def assert_close_reduction(actual, expected, *, k: int, magnitude, err_msg: str = "") -> None:
    """``actual`` and ``expected`` are two float32 evaluations of the same ``k``-term sums
    (e.g. ours and torch's): each is within :func:`sum_error_bound` of the exact sums, so they
    are within twice that of each other."""
    assert_within(actual, expected, 2 * sum_error_bound(k, magnitude), err_msg)


def abs_magnitude(fn, *arrays) -> np.ndarray:
    """``fn`` (a torch function such as ``torch.nn.functional.linear``) applied in float64 to
    the absolute values of ``arrays`` (NumPy arrays or tensors; None passes through): the
    ``magnitude`` of each of its sums."""
    import torch

    def absolute(a):
        if a is None:
            return None
        return torch.as_tensor(np.asarray(a)).to(torch.float64).abs()

    return fn(*(absolute(a) for a in arrays)).numpy()


# Winograd F(2x2, 3x3) (Lavin & Gray): y = A^T [sum_c (G g G^T) * (B^T d B)] A per 4x4 tile.
_BT = np.abs(np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64))
_G = np.abs(np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64))
_AT = np.abs(np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64))
# Rounding steps besides the C-term sum of products: the filter transform rounded once to
# float32, the input transform (two stages of at most 2 terms), the output transform (two
# stages of at most 3 terms) and the bias.
WINOGRAD_EXTRA_TERMS = 8


def winograd_error_bound(xb_nhwc, filt_ohwc, bias=None) -> np.ndarray:
    """Worst-case error of a float32 Winograd F(2x2, 3x3) convolution of the zero-bordered
    NHWC input ``xb_nhwc`` (stride 1, no further padding) by the ``[O, 3, 3, C]`` filter: the
    error analysis of each step (transforms, the C-term products' sums) on absolute values.
    The sums run over C, not 9C, but through the transforms every input of a tile enters
    every output of it, so the magnitude is that of the transforms, not of the direct sum."""
    xb = np.abs(np.asarray(xb_nhwc, np.float64))
    n, h, w, c = xb.shape
    oh, ow = h - 2, w - 2
    th, tw = -(-oh // 2), -(-ow // 2)
    xb = np.pad(xb, ((0, 0), (0, 2 * th + 2 - h), (0, 2 * tw + 2 - w), (0, 0)))
    tiles = np.lib.stride_tricks.sliding_window_view(xb, (4, 4), axis=(1, 2))[:, ::2, ::2]
    v = np.einsum("ai,ntwcij,bj->ntwcab", _BT, tiles, _BT)  # |B^T| |d| |B|
    g = np.abs(np.asarray(filt_ohwc, np.float64))
    u = np.einsum("ai,oijc,bj->ocab", _G, g, _G)  # |G| |g| |G^T|
    m = np.einsum("ntwcab,ocab->ntwoab", v, u)
    y = np.einsum("pa,ntwoab,qb->ntpwqo", _AT, m, _AT).reshape(n, 2 * th, 2 * tw, -1)
    y = y[:, :oh, :ow]
    if bias is not None:
        y = y + np.abs(np.asarray(bias, np.float64))
    return sum_error_bound(c + WINOGRAD_EXTRA_TERMS, y)


def linear_relu_error_bound(model, x) -> np.ndarray:
    """Worst-case float32 error of a ``torch.nn.Sequential`` of Linear and ReLU layers on ``x``.
    A layer's input error passes through ``|W|``, and ReLU never widens a difference nor
    grows a magnitude, so (to first order in u) the error is at most ``gamma`` of the sum of
    the layers' term counts times the network run on absolute values (weights, biases,
    input; ReLU dropped)."""
    import torch

    m, k = np.abs(np.asarray(x, np.float64)), 0
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            m = m @ np.abs(layer.weight.detach().double().numpy()).T
            if layer.bias is not None:
                m = m + np.abs(layer.bias.detach().double().numpy())
            k += layer.in_features + (layer.bias is not None)
        elif not isinstance(layer, torch.nn.ReLU):
            raise TypeError(f"no rounding bound for {type(layer).__name__}")
    return sum_error_bound(k, m)
