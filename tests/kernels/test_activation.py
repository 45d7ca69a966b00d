"""The float32 GELU (rational erf) and last-axis softmax of ``kernels.activation`` against
eager PyTorch, on the NumPy path and, when numba is installed, the compiled one; and the
XNNPACK delegate's GELU / softmax / fully connected nodes reusing their buffers across calls."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from edgetorch.kernels import accel
from edgetorch.kernels import activation as A

R = np.random.default_rng(0)


def _paths():
    yield "numpy", accel.disabled()
    if accel.available():
        yield "numba", accel.enabled()


PATHS = [name for name, _ in _paths()]


def _path(name: str):
    return dict(_paths())[name]


def _gelu_inputs() -> np.ndarray:
    dense = np.linspace(-12, 12, 240_001)
    wide = R.standard_normal(50_000) * 4
    edges = [0.0, -0.0, 5.5, -5.5, 5.4999995, -5.4999995, 1e-30, -1e-30, 1e4, -1e4, 1e30, -1e30]
    return np.concatenate([dense, wide, edges]).astype(np.float32)


@pytest.mark.parametrize("path", PATHS)
def test_gelu_matches_torch_within_1e5(path):
    x = _gelu_inputs()
    with _path(path):
        got = A.gelu_f32(x)
    want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    assert np.abs(got - want)[np.abs(x) <= 12].max() < 5e-6
    assert np.all(got[x > 6] == x[x > 6])  # and very positive ones x itself
    # very negative inputs give exactly 0 (not x * the approximation's residue)
    assert np.all(got[x < -6] == 0)


@pytest.mark.parametrize("path", PATHS)
def test_gelu_special_values(path):
    x = np.array([np.nan, -np.inf, 1e-45, -1e-45], np.float32)
    with _path(path):
        got = A.gelu_f32(x)
    want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[2:], want[2:], atol=1e-30)


@pytest.mark.parametrize("path", PATHS)
def test_prepared_gelu_reuses_its_buffer_and_reads_each_input(path):
    f = A.prepare_gelu((2, 16, 128))
    a, b = (R.standard_normal((2, 16, 128)).astype(np.float32) for _ in range(2))
    with _path(path):
        ra = f(a).copy()
        rb = f(b)
        rt = f(b.transpose(0, 2, 1).copy().transpose(0, 2, 1))  # a non-contiguous input
    for got, x in ((ra, a), (rb, b), (rt, b)):
        want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_numpy_and_numba_gelu_agree():
    if not accel.available():
        pytest.skip("numba is not installed (the accel extra): only the NumPy path exists")
    x = _gelu_inputs()
    with accel.disabled():
        a = A.gelu_f32(x)
    with accel.enabled():
        b = A.gelu_f32(x)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=4e-6)


@pytest.mark.parametrize("shape", [(2, 4, 16, 16), (3, 1), (5, 7), (2, 3, 64), (4, 65),
                                   (2, 300), (1, 1, 2)])
def test_softmax_matches_torch(shape):
    x = (R.standard_normal(shape) * 6).astype(np.float32)
    if x.size >= 3:
        x.reshape(-1)[:3] = [-1e4, 80.0, -80.0]  # a masked key and large logits
    f = A.prepare_softmax(shape, np.dtype(np.float32))
    want = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(f(x), want, rtol=1e-5, atol=1e-7)
    y = (R.standard_normal(shape)).astype(np.float32)  # the next call overwrites the buffer
    np.testing.assert_allclose(f(y), torch.softmax(torch.from_numpy(y), -1).numpy(),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(A.softmax_last(x), want, rtol=1e-5, atol=1e-7)


def test_softmax_float64_and_empty():
    x = R.standard_normal((6, 9))
    np.testing.assert_allclose(A.softmax_last(x), torch.softmax(torch.from_numpy(x), -1),
                               rtol=1e-12)
    assert A.softmax_last(np.zeros((0, 4), np.float32)).shape == (0, 4)


def test_aligned_buffers():
    for shape in [(3,), (2, 16, 128), (7, 5)]:
        a = A.aligned_empty(shape, np.float32)
        assert a.shape == shape and a.ctypes.data % 64 == 0 and a.flags.c_contiguous


class _Ffn(nn.Module):
    """Linear + GELU + Linear + softmax over a short last axis: the BERT block's nodes."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(64, 128), nn.Linear(128, 16)

    def forward(self, x):
        return torch.softmax(self.b(nn.functional.gelu(self.a(x))), -1), self.a(x)


@pytest.mark.parametrize("path", PATHS)
def test_xnnpack_ffn_matches_eager_across_calls(path):
    from edgetorch.backends.xnnpack import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower
    from edgetorch.runtime import Runtime

    torch.manual_seed(0)
    model = _Ffn().eval()
    x = torch.randn(2, 16, 64)
    ep = torch.export.export(model, (x,))
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    method = Runtime.get().load_program(pte.buffer).load_method("forward")
    assert "XnnpackBackend" in str(method) or any(
        r.kind == "delegate" for r in method.records)
    with _path(path):
        for _ in range(3):  # node buffers are reused: every call must see its own input
            x = torch.randn(2, 16, 64) * 3
            got = method.execute([x.numpy()])
            with torch.no_grad():
                want = model(x)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)
