"""The Vulkan delegate on a PC: edgetorch's Vulkan lowering run by the NumPy VkGraph
interpreter, against eager PyTorch (fp32 within 1e-5, fp16 within its rounding bound,
quantized against the quantized model), the operator report, and refusals by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from delegate_checks import params  # tests/support
from vk_cases import eager, fp16_tolerance, lower, quantize, run, successive_calls
from vk_models import build

import edgetorch.backends.vulkan.custom_ops_lib  # noqa: F401 (defines the et_vk operators)
from edgetorch.backends.vulkan.runtime import VulkanBackend
from edgetorch.backends.vulkan.serialization import vulkan_graph_schema as vk
from edgetorch.backends.vulkan.serialization.vulkan_graph_serialize import serialize_vulkan_graph
from edgetorch.errors import FormatError, OperatorMissingError
from edgetorch.examples import EXAMPLES

pytestmark = pytest.mark.torch

FP32_MODELS = ["cnn", "mlp", "transformer_encoder", "llama_decoder"]


@pytest.mark.parametrize("name", params(FP32_MODELS, {"transformer_encoder",
                                                      "llama_decoder"}))
def test_fp32_delegate_matches_eager(name):
    model, inputs = EXAMPLES[name].build()
    outs, handles = run(lower(model, inputs), inputs)
    for got, want in zip(outs, eager(model, inputs)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert handles and all(sum(h.operators_run.values()) == len(h.prepacks) + len(h.calls)
                           for h in handles)


def test_fp16_delegate_rounds_every_result_within_its_bound():
    model, inputs = EXAMPLES["cnn"].build()
    pte = lower(model, inputs, {"force_fp16": True})
    outs, (handle, *_) = run(pte, inputs)
    assert handle.fp16 and "float16 storage" in handle.report()
    assert any(isinstance(v.value, vk.VkTensor) and v.value.datatype == vk.VkDataType.FLOAT16
               for v in handle.graph.values)
    (want,) = eager(model, inputs)
    err = np.abs(outs[0] - want).max()
    assert err <= fp16_tolerance(want, rounding_ops=len(handle.calls) + 1)
    assert err > 0  # it did round: fp32 arithmetic alone would be within 1e-6


@pytest.mark.parametrize("mode", params(["w8", "w4", "dyn8"], {"w4", "dyn8"}))
def test_quantized_delegate_matches_the_quantized_model(mode):
    """Against the quantized model. With dynamic activations the Vulkan preprocess folds the
    activations' quantize/dequantize away (FoldQDQPass), as ExecuTorch's does: the delegate
    computes the weight-only model, whose weights are the same (same weight observer)."""
    model, inputs = EXAMPLES["mlp"].build()
    with torch.no_grad():
        want = quantize(model, inputs, "w8" if mode == "dyn8" else mode).module()(*inputs).numpy()
    outs, (handle, *_) = run(lower(model, inputs, quant=mode), inputs)
    np.testing.assert_allclose(outs[0], want, atol=1e-5, rtol=1e-5)
    names = set(handle.operators_run)
    expected = {"w8": "aten._weight_int8pack_mm.default", "w4": "et_vk.linear_qcs4w.default",
                "dyn8": "quantized_decomposed.dequantize_per_channel.default"}[mode]
    assert expected in names


def test_an_unknown_operator_is_refused_by_name_at_load():
    t = vk.VkTensor(vk.VkDataType.FLOAT32, [2], -1, -1)
    graph = vk.VkGraph(chain=[vk.OperatorCall(0, "aten.frobnicate.default", [0, 1])],
                       values=[vk.VkValue(t), vk.VkValue(t)], input_ids=[0], output_ids=[1])
    with pytest.raises(OperatorMissingError, match="aten.frobnicate.default"):
        VulkanBackend().init(memoryview(serialize_vulkan_graph(graph, [], [])), {})


def test_the_report_names_what_ran():
    model, inputs = EXAMPLES["mlp"].build()
    _, (handle, *_) = run(lower(model, inputs), inputs)
    report = handle.report()
    assert "aten.linear.default x3" in report and report.startswith("VulkanBackend")


@pytest.mark.parametrize("name", ["accumulator", "rolling_cache"])
def test_an_aliased_mutable_buffer_keeps_its_state_across_calls(name):
    """``alias_buffer_mutations``: the delegate owns the buffer and writes its new value into
    it, as ExecuTorch's Vulkan runtime does on the GPU; successive calls see the last state
    (eager PyTorch doing the same calls), and a newly loaded method starts from the initial."""
    model, inputs = build(name)
    pte = lower(model, inputs, {"alias_buffer_mutations": True})
    pairs, (handle,) = successive_calls(pte, model, inputs)
    for got, want in pairs:
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert not np.allclose(pairs[0][0], pairs[1][0])  # the state did change the output
    assert handle.operators_run["et_vk.prepack.default"] == len(handle.prepacks)  # once
    assert len(handle.state_ids) == 1 and "1 mutable state tensors" in handle.report()
    again, _ = successive_calls(pte, model, inputs, calls=1)
    np.testing.assert_array_equal(again[0][0], pairs[0][0])


def test_an_operator_writing_a_constant_is_refused_at_load():
    t = vk.VkTensor(vk.VkDataType.FLOAT32, [2], -1, -1)
    const = vk.VkTensor(vk.VkDataType.FLOAT32, [2], 0, -1)
    graph = vk.VkGraph(chain=[vk.OperatorCall(0, "aten.abs.default", [0, 1])],
                       values=[vk.VkValue(t), vk.VkValue(const)], input_ids=[0], output_ids=[1])
    blob = serialize_vulkan_graph(graph, [np.zeros(2, np.float32)], [])
    with pytest.raises(FormatError, match="writes constant value 1"):
        VulkanBackend().init(memoryview(blob), {})


class _SplitThenGrid(torch.nn.Module):
    """A list-valued operator (split_with_sizes) and the delegate's own grid_priors."""

    def forward(self, x):
        a, b, c = torch.split(x, [2, 3, 1], dim=1)
        grid = torch.ops.et_vk.grid_priors(x, 8, 0.5)
        return a * 2, b + 1, c - 1, grid


def test_list_outputs_and_grid_priors_match_eager():
    model, inputs = _SplitThenGrid(), (torch.rand(1, 6, 5, 7),)
    outs, (handle, *_) = run(lower(model, inputs), inputs)
    assert {"aten.split_with_sizes_copy.default", "et_vk.grid_priors.default"} <= set(
        handle.operators_run)
    # grid centres are exact in float32 ((i + 0.5) * 8, small integers and halves)
    for got, want in zip(outs, eager(model, inputs)):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
