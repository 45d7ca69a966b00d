"""NNCF int8 through ``OpenVINOQuantizer``: MobileNetV2 quantized by edgetorch runs in our
runtime and in ExecuTorch 1.5.1's, and agrees with the float model's top-1 on >= 95% of 100
random inputs. A small CNN covers the same path in the default run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ov_helpers import lower, run_ours, structure

from edgetorch.backends.openvino.recipes import quantize_for_openvino
from edgetorch.errors import FeatureNotAvailableError
from edgetorch.examples import EXAMPLES

N_EVAL = 100


def _calibration(name: str, n: int = 20):
    return [EXAMPLES[name].example_inputs(seed=1000 + i) for i in range(n)]


def _quantized_pte(name: str) -> tuple[bytes, torch.nn.Module]:
    model, inputs = EXAMPLES[name].build()
    ep = quantize_for_openvino(model, inputs, _calibration(name))
    return lower(ep.module(), inputs), model


def _top1_agreement(name, model, outputs) -> float:
    agree = 0
    for i, out in enumerate(outputs):
        with torch.no_grad():
            ref = model(*EXAMPLES[name].example_inputs(seed=i))
        agree += int(np.argmax(out) == int(ref.argmax()))
    return agree / len(outputs)


def test_weight_only_modes_are_refused():
    from edgetorch.backends.openvino import OpenVINOQuantizer, QuantizationMode  # needs NNCF

    with pytest.raises(FeatureNotAvailableError, match="weight-only"):
        OpenVINOQuantizer(mode=QuantizationMode.INT4WO_SYM)


def test_int8_cnn_is_one_delegate_close_to_float():
    pte, model = _quantized_pte("cnn")
    s = structure(pte)
    assert (len(s["delegates"]), s["operators"]) == (1, [])
    x = EXAMPLES["cnn"].example_inputs()
    out = run_ours(pte, [t.numpy() for t in x])[0]
    ref = model(*x).detach().numpy()
    assert np.abs(out - ref).max() <= 0.05 * max(1.0, np.abs(ref).max())  # int8 error
    assert not np.allclose(out, ref, atol=1e-5)  # and it really is quantized


@pytest.mark.slow
@pytest.mark.compat
def test_int8_mobilenet_v2_top1_in_both_runtimes(ref_ov, tmp_path):
    from refenv_openvino import ref_ov_run_many

    pte, model = _quantized_pte("mobilenet_v2")
    inputs = [EXAMPLES["mobilenet_v2"].example_inputs(seed=i)[0].numpy() for i in range(N_EVAL)]
    ours = [run_ours(pte, [x])[0] for x in inputs]
    assert _top1_agreement("mobilenet_v2", model, ours) >= 0.95
    path = tmp_path / "mv2_int8.pte"
    path.write_bytes(pte)
    theirs = ref_ov_run_many(path, inputs)
    assert _top1_agreement("mobilenet_v2", model, theirs) >= 0.95
    # Same blob, same OpenVINO, same (device-default) precision: the same numbers.
    np.testing.assert_allclose(np.stack(theirs), np.stack(ours), rtol=0, atol=1e-5)
