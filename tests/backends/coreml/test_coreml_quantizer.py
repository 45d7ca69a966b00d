"""``CoreMLQuantizer``: coremltools' PT2E quantizer at ExecuTorch's name. A model quantized
with it (``prepare_pt2e`` / calibrate / ``convert_pt2e``), lowered to Core ML and run by the
ML program interpreter matches the quantized model run eagerly; ExecuTorch 1.5.1's
``CoreMLQuantizer`` produces the same quantize/dequantize parameters on the same model, and
the same delegate. Quantizing costs coremltools' pattern matching a torch.export per pattern
(a minute or more on a busy machine): those cases are slow (``make test-vulkan-coreml-slow``)."""

from __future__ import annotations

import functools
import json
import sys

import numpy as np
import pytest
import torch
from cm_cases import decoded_model, delegates, eager, lower, run
from cm_quant import qdq_params, quantize

from edgetorch.examples import EXAMPLES

pytestmark = pytest.mark.torch
ct = pytest.importorskip("coremltools")
# Quantized activations need iOS 17's quantize/dequantize; fp32 keeps Core ML's arithmetic
# that of the quantized model (fp16 would round between every operation).
SPECS = {"minimum_deployment_target": "iOS17", "compute_precision": "FLOAT32"}


def _quantizer():
    from edgetorch.backends.apple.coreml.quantizer import CoreMLQuantizer

    return CoreMLQuantizer


@functools.cache
def _quantized(name: str, config: str):
    model, inputs = EXAMPLES[name].build()
    return model, inputs, quantize(model, inputs, _quantizer(), config)


def _lower(model, inputs):
    return lower(model, inputs, minimum_deployment_target=ct.target.iOS17,
                 compute_precision=ct.precision.FLOAT32)


def _output_step(converted: torch.fx.GraphModule) -> float:
    (out,) = [n for n in converted.graph.nodes if n.op == "output"][0].args[0]
    assert "dequantize_per_tensor" in str(out.target)
    return float(out.args[1])


def test_it_is_coremltools_quantizer_and_leaves_torch_ao_alone():
    quantizer = _quantizer()
    from torchao.quantization.pt2e.quantizer import Quantizer

    assert quantizer.__module__ == "coremltools.optimize.torch.quantization._coreml_quantizer"
    assert issubclass(quantizer, Quantizer)  # torchao's, which prepare_pt2e takes
    assert not [m for m in sys.modules if m.startswith(("torch.ao.quantization.quantizer",
                                                        "torch.ao.quantization.pt2e"))]


@pytest.mark.slow
def test_static_8bit_model_runs_in_core_ml_as_the_quantized_model():
    """8-bit weights and activations. The program quantizes and dequantizes where the
    converted model does, in fp32: equal up to a flipped rounding of the output's quantize
    (one step of its scale)."""
    model, inputs, converted = _quantized("mlp", "static8")
    outs, (handle,) = run(_lower(converted, inputs), inputs)
    (want,) = eager(converted, inputs)
    assert np.abs(outs[0] - want).max() <= _output_step(converted)
    assert handle.operators_run["quantize"] == handle.operators_run["dequantize"] == 4
    assert handle.operators_run["constexpr_affine_dequantize"] == 3  # the int8 weights


@pytest.mark.slow
def test_weight_only_8bit_model_matches_the_quantized_model():
    model, inputs, converted = _quantized("mlp", "weight8")
    outs, (handle,) = run(_lower(converted, inputs), inputs)
    np.testing.assert_allclose(outs[0], eager(converted, inputs)[0], atol=1e-5, rtol=1e-5)
    assert "quantize" not in handle.operators_run


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "coremltools 9.0's int_op_canonicalization pass (iOS 17) turns dequantize -> reshape -> "
    "quantize into a reshape of the integers without checking that both sides share scale "
    "and zero point; the cnn's flatten sits between two different quantizations, so the "
    "Core ML program itself computes other numbers (ExecuTorch's delegate is the same)"))
def test_a_flatten_between_two_quantizations_keeps_its_requantization():
    model, inputs, converted = _quantized("cnn", "static8")
    outs, _ = run(_lower(converted, inputs), inputs)
    (want,) = eager(converted, inputs)
    assert np.abs(outs[0] - want).max() <= _output_step(converted)


@pytest.mark.slow
@pytest.mark.compat
@pytest.mark.parametrize("config", ["static8", "weight8"])
def test_executorch_coreml_quantizer_gives_the_same_graph_and_delegate(config, coreml_ref):
    theirs = coreml_ref.get("mlp", SPECS, config)
    model, inputs, converted = _quantized("mlp", config)
    assert qdq_params(converted) == json.loads(theirs.with_name(theirs.name + ".qdq.json")
                                               .read_text())
    pte = theirs.read_bytes()
    (ours,), (their_files,) = delegates(_lower(converted, inputs)), delegates(pte)
    assert decoded_model(ours) == decoded_model(their_files)
    outs, _ = run(pte, inputs)  # ExecuTorch's file, in edgetorch's runtime
    (want,) = eager(converted, inputs)
    step = _output_step(converted) if config == "static8" else 1e-5
    assert np.abs(outs[0] - want).max() <= step
