"""The lean execute path: outputs copied by default or views on request, the thread-count
option, no per-call memory growth, and constants mapped rather than copied at load. Numbers
are checked against eager PyTorch."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from memory_probe import rss_bytes, steady_state_growth

from edgetorch.examples import get_example
from edgetorch.exir import to_edge
from edgetorch.runtime import Runtime


def _load(model: torch.nn.Module, inputs: tuple) -> object:
    pte = to_edge(torch.export.export(model, inputs)).to_executorch().buffer
    return Runtime.get().load_program(pte).load_method("forward")


@pytest.fixture(scope="module")
def tiny():
    ex = get_example("tiny_classifier")
    model, inputs = ex.factory(), ex.example_inputs()
    return model, _load(model, inputs)


def _eager(model, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def test_outputs_are_copies_by_default_and_views_on_request(tiny):
    model, method = tiny
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, 20)).astype(np.float32) for _ in range(2))
    copied = method.execute([a])[0]
    view = method.execute([a], copy_outputs=False)[0]
    np.testing.assert_allclose(copied, _eager(model, a), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(view, copied)
    assert not np.shares_memory(copied, view)
    method.execute([b])  # the next call reuses the planned memory the view points into
    np.testing.assert_allclose(view, _eager(model, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(copied, _eager(model, a), rtol=1e-5, atol=1e-6)


def test_views_of_torch_inputs_come_back_as_torch(tiny):
    model, method = tiny
    x = torch.randn(1, 20)
    out = method.execute([x], copy_outputs=False)[0]
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out.clone(), model(x).detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_thread_count_option_keeps_eager_numbers(threads):
    pytest.importorskip("threadpoolctl")
    ex = get_example("cnn")
    model, inputs = ex.factory(), ex.example_inputs()
    method = _load(model, inputs)
    runtime = Runtime.get()
    before = runtime.get_num_threads()
    try:
        runtime.set_num_threads(threads)
        assert runtime.get_num_threads() == threads
        got = method.execute([x.numpy() for x in inputs])[0]
    finally:
        runtime.set_num_threads(before)
    with torch.no_grad():
        np.testing.assert_allclose(got, model(*inputs).numpy(), rtol=1e-5, atol=1e-5)


def test_ten_thousand_calls_do_not_grow_memory(tiny):
    _, method = tiny
    x = [np.random.default_rng(1).standard_normal((1, 20)).astype(np.float32)]
    rss_growth, traced_growth, _ = steady_state_growth(lambda: method.execute(x))
    # Nothing is kept from call to call: what the calls allocated (outputs, kernel
    # temporaries) is released; a leak of even one small object per call would show as 500 KB+.
    assert traced_growth < 16 * 1024, f"traced Python memory grew by {traced_growth} bytes"
    assert rss_growth < 4 * 2**20, "RSS grew over 10,000 execute calls"


def test_loading_a_large_program_maps_its_constants(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4608, 4608).eval()  # ~85 MB of float32 weights
    x = torch.randn(1, 4608)
    path = tmp_path / "big.pte"
    path.write_bytes(to_edge(torch.export.export(model, (x,))).to_executorch().buffer)
    size = path.stat().st_size
    assert size > 80 * 2**20
    del model
    gc.collect()
    rss = rss_bytes()
    method = Runtime.get().load_program(path).load_method("forward")
    grown = rss_bytes() - rss
    assert grown < size / 10, f"loading grew RSS by {grown} bytes for a {size}-byte file"
    out = method.execute([x.numpy()])[0]
    torch.manual_seed(0)
    with torch.no_grad():
        expected = torch.nn.Linear(4608, 4608).eval()(x).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
