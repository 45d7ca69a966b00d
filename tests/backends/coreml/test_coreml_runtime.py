"""The Core ML delegate on a PC: edgetorch's Core ML lowering (coremltools, the ``coreml``
extra) run by the NumPy ML-program interpreter, against eager PyTorch: fp16 programs within
fp16's rounding bound, fp32 programs within 1e-5; the report and refusals by name."""

from __future__ import annotations

import numpy as np
import pytest
from cm_cases import delegates, eager, fp16_tolerance, lower, run
from delegate_checks import params  # tests/support

from edgetorch.backends.apple.coreml.runtime import CoreMLBackend, mil_ops
from edgetorch.errors import OperatorMissingError
from edgetorch.examples import EXAMPLES

pytestmark = pytest.mark.torch
ct = pytest.importorskip("coremltools")


@pytest.mark.parametrize("name", params(["cnn", "mlp", "transformer_encoder"],
                                         {"transformer_encoder"}))
def test_fp16_program_matches_eager_within_fp16_rounding(name):
    model, inputs = EXAMPLES[name].build()
    outs, handles = run(lower(model, inputs), inputs)
    ops = sum(len(h.steps) for h in handles)
    for got, want in zip(outs, eager(model, inputs)):
        assert np.abs(got - want).max() <= fp16_tolerance(want, ops)
    assert all(h.operators_run for h in handles)


def test_fp32_program_matches_eager_to_1e5():
    model, inputs = EXAMPLES["cnn"].build()
    pte = lower(model, inputs, compute_precision=ct.precision.FLOAT32)
    outs, (handle, *_) = run(pte, inputs)
    np.testing.assert_allclose(outs[0], eager(model, inputs)[0], atol=1e-5, rtol=1e-5)
    assert "cast" not in handle.operators_run  # nothing to convert to fp16


def test_compile_specs_reach_the_program():
    model, inputs = EXAMPLES["mlp"].build()
    pte = lower(model, inputs, minimum_deployment_target=ct.target.iOS17,
                compute_unit=ct.ComputeUnit.CPU_ONLY)
    from edgetorch.schema.pte import PteFile

    d = PteFile.parse(pte).program.execution_plan[0].delegates[0]
    specs = {s.key: bytes(s.value) for s in d.compile_specs}
    assert specs == {"compute_units": b"cpu_only", "min_deployment_target": b"8",
                     "model_compute_precision": b"float16", "model_type": b"model"}
    (files,) = delegates(pte)
    assert set(files) >= {"metadata.json", "model.mlpackage/Manifest.json",
                          "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"}
    outs, (handle, *_) = run(pte, inputs)
    assert handle.program.opset == "CoreML7" and handle.program.specification_version == 8


def test_an_operation_without_a_handler_is_refused_by_name(monkeypatch):
    model, inputs = EXAMPLES["cnn"].build()
    pte = lower(model, inputs)
    monkeypatch.delitem(mil_ops.MIL_OPS, "relu")
    with pytest.raises(OperatorMissingError, match="'relu'"):
        run(pte, inputs)


def test_report_names_what_ran():
    model, inputs = EXAMPLES["cnn"].build()
    _, (handle, *_) = run(lower(model, inputs), inputs)
    assert handle.report().startswith("CoreMLBackend") and "conv x3" in handle.report()
    assert isinstance(handle, object) and CoreMLBackend().is_available()
