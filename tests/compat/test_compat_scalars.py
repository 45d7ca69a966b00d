"""Scalar lifting against ExecuTorch 1.5.1: its ``to_edge`` turns the Python scalar of a
Tensor-overload call into a lifted 0-d constant (``ScalarToTensorPass``) and casts mixed
operands (``RemoveMixedTypeOperators``); with ExecuTorch's defaults for the two options where
ours differ, edgetorch's ``.pte`` is ExecuTorch's byte for byte, and each side's file runs in
the other's runtime equal to eager."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refenv import ref_available, ref_export, ref_run  # noqa: E402

from edgetorch.examples import load_model_spec  # noqa: E402
from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

MODELS = Path(__file__).with_name("scalar_models.py")
FACTORIES = ["scalar_mix", "views_and_slices"]


def _eager(model, inputs):
    with torch.no_grad():
        out = model(*inputs)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("factory", FACTORIES)
def test_pte_bytes_equal_executorch_and_both_run(factory, tmp_path):
    spec = f"{MODELS}:{factory}"
    theirs = ref_export(spec, tmp_path / "et.pte")
    model, inputs = load_model_spec(spec)
    ours = to_edge(torch.export.export(model, inputs)).to_executorch(
        ExecutorchBackendConfig(fold_constants=False, fuse_batch_norm=False, emit_mutable_buffer_names=False))
    assert ours.buffer == theirs.pte.read_bytes()

    expected = _eager(model, inputs)
    default = to_edge(torch.export.export(model, inputs)).to_executorch()  # folded, smaller
    assert len(default.buffer) <= len(ours.buffer)
    (tmp_path / "ours.pte").write_bytes(default.buffer)
    got_et = ref_run(tmp_path / "ours.pte", [x.numpy() for x in inputs])
    got_ours = Runtime.get().load_program(theirs.pte.read_bytes()).load_method(
        "forward").execute(list(inputs))
    for et, mine, want in zip(got_et, got_ours, expected, strict=True):
        np.testing.assert_allclose(et, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(mine), want, rtol=1e-5, atol=1e-5)
        assert np.asarray(mine).dtype == want.dtype and et.dtype == want.dtype
