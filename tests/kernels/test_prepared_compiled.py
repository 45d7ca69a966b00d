"""Prepared kernels with compiled loops (kernels/portable/prepared.py, norm_accel.py,
special_accel.py: layer norm, mean, softmax, GELU, sigmoid): the compiled steps (numba) and
the NumPy steps give the kernel's very bits, and whole programs keep eager PyTorch's numbers,
with the compiled loops and without them (``accel.disabled()``)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from edgetorch.kernels import accel
from edgetorch.kernels.portable import norm_accel
from edgetorch.kernels.registry import KERNELS

R = np.random.default_rng(7)
LN = "aten::native_layer_norm.out"
MODES = ["compiled", "numpy"]


def _mode(mode):
    if mode == "compiled":
        if not accel.available():
            pytest.skip("numba is not installed (the accel extra)")
        return contextlib.nullcontext()
    return accel.disabled()


def _run(steps):
    for step in steps:
        step()


def _layer_norm_case(shape, k, dtype, weight=True, bias=True):
    x = (R.standard_normal(shape) * 3 + 1).astype(dtype)
    norm = shape[len(shape) - k:]
    w = R.standard_normal(norm).astype(dtype) if weight else None
    b = R.standard_normal(norm).astype(dtype) if bias else None
    return x, list(norm), w, b


def _outs(shape, k, dtype):
    keep = shape[:len(shape) - k] + (1,) * k
    return [np.full(s, np.nan, dtype) for s in (shape, keep, keep)]


LN_CASES = [((2, 16, 64), 1, np.float32, True, True),
            ((3, 5), 1, np.float32, True, True),
            ((4, 7), 1, np.float32, False, False),
            ((4, 7), 1, np.float32, True, False),
            ((2, 3, 300), 1, np.float32, True, True),  # pairwise halves (> 128)
            ((3, 1000), 1, np.float64, True, True),
            ((2, 6, 20), 2, np.float32, True, True),  # two normalised axes
            ((5, 1), 1, np.float32, True, True),
            ((1, 8, 768), 1, np.float32, True, True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", LN_CASES, ids=[str(c[:3]) for c in LN_CASES])
def test_prepared_layer_norm_gives_the_kernels_bits(case, mode):
    shape, k, dtype, weight, bias = case
    x, norm, w, b = _layer_norm_case(shape, k, dtype, weight, bias)
    fast, slow = _outs(shape, k, dtype), _outs(shape, k, dtype)
    with _mode(mode):
        steps = KERNELS[LN].prepare(x, norm, w, b, 1e-5, *fast)
    assert steps is not None and (mode == "numpy" or len(steps) == 1)
    _run(steps)
    KERNELS[LN].fn(x, norm, w, b, 1e-5, *slow)
    for f, s in zip(fast, slow):
        assert f.tobytes() == s.tobytes()
    # the prepared step reads the inputs of the moment
    x[...] = np.roll(x.reshape(-1), 3).reshape(x.shape) * 2
    _run(steps)
    KERNELS[LN].fn(x, norm, w, b, 1e-5, *slow)
    assert fast[0].tobytes() == slow[0].tobytes()
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), norm,
                                          None if w is None else torch.from_numpy(w),
                                          None if b is None else torch.from_numpy(b), 1e-5)
    np.testing.assert_allclose(fast[0], want.numpy(), rtol=1e-5, atol=1e-5)


def test_compiled_layer_norm_declines_broadcast_weights():
    x = R.standard_normal((2, 3, 8)).astype(np.float32)
    w = R.standard_normal((1, 8)).astype(np.float32)  # broadcasts, not the normalised shape
    if not accel.available():
        pytest.skip("numba is not installed (the accel extra)")
    steps = KERNELS[LN].prepare(x, [8], w, None, 1e-5, *_outs((2, 3, 8), 1, np.float32))
    assert steps is None or len(steps) > 1  # NumPy steps (or the kernel), not the loop


def test_compiled_pairwise_sum_is_numpys():
    if not accel.available():
        pytest.skip("numba is not installed (the accel extra)")
    st, vals = np.empty((3, 64), np.int64), np.empty(64, np.float32)
    norm_accel._compile()
    fn = norm_accel._pairwise.compiled()
    for n in (1, 7, 8, 9, 127, 128, 129, 255, 1000, 4097):
        a = (R.standard_normal(n) * 5).astype(np.float32)
        assert fn(a, 0, n, False, np.float32(0), st, vals) == np.add.reduce(a)
        assert fn(a, 0, n, True, np.float32(0), st, vals) == np.add.reduce(a * a)


MEAN_CASES = [((1, 16, 64), [-1], True), ((3, 7, 33), [-1], True), ((4, 1), [1], True),
              ((1, 1280, 7, 7), [-1, -2], True), ((2, 8, 5, 3), [3, 2], False),
              ((1, 300), [-1], True), ((2, 3, 4), [1], True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", MEAN_CASES, ids=[str(c) for c in MEAN_CASES])
def test_prepared_mean_gives_the_kernels_bits(case, mode):
    shape, dims, keep = case
    x = (R.standard_normal(shape) ** 2).astype(np.float32)
    want_shape = tuple(1 if i in [d % len(shape) for d in dims] else s
                       for i, s in enumerate(shape)) if keep else \
        tuple(s for i, s in enumerate(shape) if i not in [d % len(shape) for d in dims])
    out, want = (np.full(want_shape, np.nan, np.float32) for _ in range(2))
    with _mode(mode):
        steps = KERNELS["aten::mean.out"].prepare(x, dims, keep, None, out)
    KERNELS["aten::mean.out"].fn(x, dims, keep, None, want)
    if steps is None:  # a middle axis; one row without numba: the kernel runs
        assert dims == [1] and len(shape) == 3 or (mode == "numpy" and shape[0] == 1)
        return
    _run(steps)
    assert out.tobytes() == want.tobytes()
    np.testing.assert_allclose(out, torch.from_numpy(x).mean(dims, keepdim=keep).numpy(),
                               rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["transformer_encoder", "llama_decoder"])
def test_programs_with_prepared_norms_give_the_closures_bits(name, mode):
    from optimized_pair import assert_same_bits_and_eager, fast_and_slow

    from edgetorch.examples import get_example

    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    with _mode(mode):  # (the preparers choose their loops at load)
        fast, slow = fast_and_slow(model, inputs)
        assert_same_bits_and_eager(fast, slow, model, inputs)


def test_prepared_gelu_gives_the_kernels_bits():
    if not accel.available():
        pytest.skip("numba is not installed (the accel extra)")
    x = (R.standard_normal((2, 16, 128)) * 4).astype(np.float32)
    x.reshape(-1)[:9] = [np.nan, np.inf, -np.inf, 0, -0.0, 6.0, -5.99, 1e30, 6.0625]
    fast, slow = np.empty_like(x), np.empty_like(x)
    (step,) = KERNELS["aten::gelu.out"].prepare(x, "none", fast)
    step()
    KERNELS["aten::gelu.out"].fn(x, "none", slow)
    assert fast.tobytes() == slow.tobytes()
    x *= -0.5  # read when it runs
    step()
    KERNELS["aten::gelu.out"].fn(x, "none", slow)
    assert fast.tobytes() == slow.tobytes()
    finite = np.isfinite(x)  # (torch's own float32 GELU gives nan at +inf)
    want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(fast[finite], want[finite], rtol=1e-6, atol=1e-6)


def test_gelu_preparer_keeps_the_kernel_elsewhere():
    x, out = np.ones((4, 8), np.float32), np.empty((4, 8), np.float32)
    prep = KERNELS["aten::gelu.out"].prepare
    assert prep(x, "tanh", out) is None
    assert prep(x.astype(np.float64), "none", out.astype(np.float64)) is None
    with accel.disabled():
        assert prep(x, "none", out) is None


SOFTMAX_CASES = [(2, 4, 16, 16), (3, 300), (5, 7), (4, 1)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SOFTMAX_CASES, ids=[str(c) for c in SOFTMAX_CASES])
def test_prepared_softmax_gives_the_kernels_bits(shape, mode):
    x = (R.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    flat[0] = -np.inf  # an all -inf row: nan, as torch
    if flat.shape[0] > 2:
        flat[1, 0] = np.nan
        flat[2, -1] = np.inf
    fast, slow = np.empty_like(x), np.empty_like(x)
    with _mode(mode):
        steps = KERNELS["aten::_softmax.out"].prepare(x, -1, False, fast)
    assert steps is not None and (mode == "numpy" or len(steps) == 3)
    _run(steps)
    KERNELS["aten::_softmax.out"].fn(x, -1, False, slow)
    assert fast.tobytes() == slow.tobytes()
    x *= 0.5  # read when it runs
    _run(steps)
    KERNELS["aten::_softmax.out"].fn(x, -1, False, slow)
    assert fast.tobytes() == slow.tobytes()
    ok = np.isfinite(x).all(axis=-1)
    want = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(fast[ok], want[ok], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_prepared_layer_norm_of_constant_rows_without_eps(mode):
    """var + eps = 0: rstd is inf and the row nan, as the kernel (no exception raised)."""
    x = np.ones((3, 8), np.float32)
    fast, slow = _outs((3, 8), 1, np.float32), _outs((3, 8), 1, np.float32)
    with _mode(mode):
        _run(KERNELS[LN].prepare(x, [8], None, None, 0.0, *fast))
    KERNELS[LN].fn(x, [8], None, None, 0.0, *slow)
    for f, s in zip(fast, slow):
        assert f.tobytes() == s.tobytes()


@pytest.mark.parametrize("mode", MODES)
def test_prepared_sigmoid_gives_the_kernels_bits(mode):
    x = np.concatenate([R.standard_normal(60) * 30, [np.inf, -np.inf, 0, -0.0, np.nan, 88,
                                                       -88, 1e-30]]).astype(np.float32)
    x = x.reshape(4, 17)
    fast, slow = np.empty_like(x), np.empty_like(x)
    with _mode(mode):
        steps = KERNELS["aten::sigmoid.out"].prepare(x, fast)
    assert steps is not None and (mode == "numpy" or len(steps) == 3)
    _run(steps)
    KERNELS["aten::sigmoid.out"].fn(x, slow)
    assert fast.tobytes() == slow.tobytes()
    x *= -0.25
    _run(steps)
    KERNELS["aten::sigmoid.out"].fn(x, slow)
    assert fast.tobytes() == slow.tobytes()
    ok = ~np.isnan(x)
    np.testing.assert_allclose(fast[ok], torch.sigmoid(torch.from_numpy(x)).numpy()[ok],
                               rtol=1e-6, atol=1e-7)


FC_CASES = [  # (x shape, N, weight layout, bias)
    ((1, 20), 64, "transposed", True),  # the tutorial classifier's layer
    ((32, 64), 48, "c", True),
    ((5, 7), 3, "transposed", False),
    ((2, 3, 16), 8, "transposed", True),  # linear over a batch of rows
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,n,layout,bias", FC_CASES)
def test_prepared_fully_connected_gives_the_kernels_bits(mode, shape, n, layout, bias):
    """addmm and linear: the one-call compiled GEMM with the bias (or NumPy's matmul then
    add) in the kernel and in its preparer, same bits; eager PyTorch's numbers."""
    x = R.standard_normal(shape).astype(np.float32)
    weight = R.standard_normal((n, shape[-1])).astype(np.float32)  # torch's [N, K]
    w = weight.T if layout == "transposed" else np.ascontiguousarray(weight.T)
    b = R.standard_normal(n).astype(np.float32) if bias else None
    out_shape = shape[:-1] + (n,)
    with _mode(mode):
        calls = [("aten::linear.out", (x, weight, b))]
        if len(shape) == 2 and bias:
            calls.append(("aten::addmm.out", (b, x, w, 1, 1)))
        for name, args in calls:
            want = KERNELS[name].fn(*args, np.full(out_shape, np.nan, np.float32))
            got = np.full(out_shape, np.nan, np.float32)
            steps = KERNELS[name].prepare(*args, got)
            assert steps is not None, name
            _run(steps)
            assert got.tobytes() == want.tobytes(), name
            ref = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(weight),
                                             None if b is None else torch.from_numpy(b))
            np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-5)


def test_fully_connected_overlapping_or_float64_keeps_numpy_path():
    """In place (out is the bias) or float64: no compiled call, NumPy's result."""
    from edgetorch.kernels.portable import linalg

    x = R.standard_normal((4, 6)).astype(np.float32)
    w = R.standard_normal((6, 5)).astype(np.float32)
    c = R.standard_normal(5).astype(np.float32)
    out = np.empty((4, 5), np.float32)
    assert linalg.fc_layout(x, w, c, out) is not None
    assert linalg.fc_layout(x, w, c, x[:, :5]) is None  # out overlaps x
    assert linalg.fc_layout(x.astype(np.float64), w, c, out) is None
    assert linalg.fc_layout(x, w, np.ones((4, 5), np.float32), out) is None  # 2-D bias
    c2 = np.tile(c, (4, 1))
    got = KERNELS["aten::addmm.out"].fn(c2, x, w, 1, 1, c2)  # in place, into self
    np.testing.assert_allclose(got, x @ w + c, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 4, 16, 16), (3, 7), (2, 1, 5)])
def test_prepared_any_over_rows_gives_the_kernels_bits(mode, shape):
    """any over a short last axis (SDPA's "row fully masked" check): one compiled pass, or
    NumPy's transposed reduction; the kernel's bools either way."""
    x = R.random(shape) < 0.1
    x.reshape(-1, shape[-1])[0] = False  # a row with nothing set
    out_shape = shape[:-1] + (1,)
    with _mode(mode):
        got = np.ones(out_shape, np.bool_)
        _run(KERNELS["aten::any.out"].prepare(x, -1, True, got))
    want = KERNELS["aten::any.out"].fn(x, -1, True, np.ones(out_shape, np.bool_))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, x.any(axis=-1, keepdims=True))


def test_a_kernel_takes_one_preparer():
    """A second preparer for the same kernel is refused (it would silently replace one)."""
    from edgetorch.errors import RegistrationError
    from edgetorch.kernels.registry import prepares

    with pytest.raises(RegistrationError, match="already has a preparer"):
        prepares("aten::any.out")(lambda x, dim, keepdim, out: None)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((16, 16), (), ()), ((1, 4, 16, 1), (1, 4, 16, 16), (1, 4, 16, 16)),
                                    ((5,), (3, 5), (1,)), ((2, 1, 3), (1, 4, 1), (2, 4, 3))])
def test_prepared_where_gives_the_kernels_bits(mode, shapes):
    """where with broadcasting (SDPA's masks): one compiled pass over broadcast views, or
    NumPy's two copies; the kernel's values, NaN and -0.0 included."""
    cs, as_, bs = shapes
    cond = R.random(cs) < 0.5
    a = R.standard_normal(as_).astype(np.float32)
    b = R.standard_normal(bs).astype(np.float32)
    if a.size > 1:
        a.reshape(-1)[:2] = [np.nan, -0.0]
    out_shape = np.broadcast_shapes(cs, as_, bs)
    with _mode(mode):
        got = np.full(out_shape, 7, np.float32)
        _run(KERNELS["aten::where.self_out"].prepare(cond, a, b, got))
    want = KERNELS["aten::where.self_out"].fn(cond, a, b, np.full(out_shape, 7, np.float32))
    assert got.tobytes() == want.tobytes()
