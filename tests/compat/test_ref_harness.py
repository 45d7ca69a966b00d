"""The reference harness itself: ExecuTorch export + run agrees with eager PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from refenv import RefToolError, ref_available, ref_export, ref_run, ref_stats

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch venv not available"),
]


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    return ref_export("tiny_classifier", tmp_path_factory.mktemp("ref") / "tiny.pte")


def test_run_matches_eager(tiny_export):
    inputs = tiny_export.inputs()
    assert [a.shape for a in inputs] == [(1, 20)]
    outputs = ref_run(tiny_export.pte, inputs)
    expected = tiny_export.expected()
    assert len(outputs) == len(expected) == 1
    np.testing.assert_allclose(outputs[0], expected[0], rtol=1e-5, atol=1e-6)


def test_expected_matches_our_eager(tiny_export):
    """The reference venv builds the same weights and inputs as ours (same torch, same seeds)."""
    torch = pytest.importorskip("torch")
    examples = pytest.importorskip("edgetorch.examples")
    model, inputs = examples.get_example("tiny_classifier").build()
    np.testing.assert_array_equal(inputs[0].numpy(), tiny_export.inputs()[0])
    with torch.no_grad():
        ours = model(*inputs).numpy()
    np.testing.assert_allclose(ours, tiny_export.expected()[0], rtol=1e-6, atol=1e-7)


def test_stats(tiny_export):
    stats = ref_stats(tiny_export.pte)
    assert stats["file_size"] == tiny_export.pte.stat().st_size
    forward = stats["methods"]["forward"]
    assert forward["operators"] == ["aten::addmm.out", "aten::permute_copy.out", "aten::relu.out"]
    assert forward["instruction_count"] > 0
    assert forward["non_const_buffer_sizes"][0] == 0


def test_failure_carries_stderr(tmp_path):
    bogus = tmp_path / "bogus.pte"
    bogus.write_bytes(b"not a program")
    with pytest.raises(RefToolError, match="stderr"):
        ref_run(bogus, [np.zeros((1, 20), np.float32)])
