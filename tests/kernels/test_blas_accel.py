"""The compiled fully connected call (edgetorch.kernels.blas_accel): one sgemm, bias as beta."""

import numpy as np
import pytest

from edgetorch.kernels import accel, blas_accel

pytestmark = pytest.mark.skipif(not accel.available(), reason="numba is not installed")
F32 = np.float32


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def test_ready_with_numba_and_numpys_openblas():
    assert blas_accel.ready()  # numba is there and NumPy's wheel ships scipy-openblas64
    with accel.disabled():
        assert not blas_accel.ready()


@pytest.mark.parametrize("layout", ["c", "fortran"])
@pytest.mark.parametrize("bias", ["none", "row", "expanded"])
@pytest.mark.parametrize("lead", [(7,), (2, 5), (1,)])
def test_one_call_equals_torch_linear(layout, bias, lead):
    torch = pytest.importorskip("torch")
    x, w = _rand(*lead, 33), _rand(33, 19, seed=1)  # w: [K, N]
    b = _rand(19, seed=2)
    weights = w if layout == "c" else np.asfortranarray(w)
    arg = {"none": blas_accel.NO_BIAS, "row": b,
           "expanded": np.ascontiguousarray(np.broadcast_to(b, lead + (19,)))}[bias]
    out = np.full(lead + (19,), np.nan, F32)
    fmt = blas_accel.weights_layout(weights, None if bias == "none" else b)
    assert fmt == ((False, 19) if layout == "c" else (True, 33))
    assert blas_accel.run(x, weights, arg, out, False, fmt)
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w.T.copy()),
                                      None if bias == "none" else torch.from_numpy(b))
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-5)


def test_refuses_what_it_cannot_read_without_writing():
    x, w, b = _rand(4, 6), _rand(6, 3), _rand(3)
    fmt = blas_accel.weights_layout(w, b)
    out = np.full((4, 3), 7.0, F32)
    assert not blas_accel.run(x[:, ::2].copy()[:, :3], w, b, out, False, fmt)  # K mismatch
    assert not blas_accel.run(np.asfortranarray(x), w, b, out, False, fmt)  # not C order
    assert not blas_accel.run(x, w, b, np.full((4, 4), 7.0, F32), False, fmt)  # wrong size
    assert (out == 7.0).all()
    assert blas_accel.weights_layout(w[::2], b) is None  # strided weights
    assert blas_accel.weights_layout(w.astype(np.float64), b) is None
    assert blas_accel.weights_layout(w, _rand(4)) is None  # bias of another width


def test_flatten_reads_any_shape_of_whole_rows():
    x, w = _rand(2, 3, 4), _rand(6, 5)  # 24 values: 4 rows of K = 6
    out = np.empty((4, 5), F32)
    assert blas_accel.run(x, w, blas_accel.NO_BIAS, out, True, blas_accel.weights_layout(w, None))
    np.testing.assert_allclose(out, x.reshape(4, 6) @ w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["transposed_input", "transposed_output", "both", "rows_2d",
                                  "column_slice", "one_row"])
@pytest.mark.parametrize("bias", ["none", "row", "expanded"])
def test_strided_input_and_output_in_place(case, bias):
    """A transposed [S, B, E] view (attention's batch-first input) is multiplied as it lies:
    one GEMM per index of a leading axis, the other axis the GEMM's rows."""
    w, b = _rand(24, 10, seed=1), _rand(10, seed=2)
    base = _rand(3, 7, 24, seed=3)
    x = {"transposed_input": base.transpose(1, 0, 2), "transposed_output": base,
         "both": base.transpose(1, 0, 2), "rows_2d": base[:, 2, :],
         "column_slice": _rand(5, 40, seed=4)[:, 8:32], "one_row": base[:1, :1]}[case]
    shape = x.shape[:-1] + (10,)
    if case in ("transposed_output", "both"):
        out = np.full(shape[1::-1] + shape[2:], np.nan, F32).transpose(1, 0, 2)
    else:
        out = np.full(shape, np.nan, F32)
    arg = {"none": blas_accel.NO_BIAS, "row": b,
           "expanded": np.ascontiguousarray(np.broadcast_to(b, shape))}[bias]
    assert not (x.flags.c_contiguous and out.flags.c_contiguous) or case == "one_row"
    assert blas_accel.run(x, w, arg, out, False, blas_accel.weights_layout(w, b))
    want = np.matmul(x.astype(np.float64), w) + (0 if bias == "none" else b)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_strided_refuses_steps_along_the_last_axis_and_overlapping_rows():
    w, b = _rand(4, 3), _rand(3)
    fmt = blas_accel.weights_layout(w, b)
    out = np.full((5, 3), 7.0, F32)
    assert not blas_accel.run(_rand(5, 8)[:, ::2], w, b, out, False, fmt)  # stride 2 along K
    assert not blas_accel.run(_rand(5, 4), w, b, out[:, ::2], False, fmt)  # 2 values, not 3
    flat = np.full(20, 7.0, F32)
    overlapping = np.lib.stride_tricks.as_strided(flat, (5, 3), (8, 4))  # rows 2 apart
    assert not blas_accel.run(_rand(5, 4), w, b, overlapping, False, fmt)
    assert (out == 7.0).all() and (flat == 7.0).all()
    rows = np.lib.stride_tricks.as_strided(_rand(20), (5, 4), (8, 4))  # input rows overlap: fine
    assert blas_accel.run(rows, w, b, out, False, fmt)
    np.testing.assert_allclose(out, rows @ w + b, rtol=1e-5, atol=1e-5)
