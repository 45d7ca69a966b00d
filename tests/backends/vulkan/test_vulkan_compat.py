"""Against ExecuTorch 1.5.1: edgetorch's Vulkan ``.pte`` is ExecuTorch's byte for byte (same
model, same options), and ExecuTorch's Vulkan ``.pte`` runs in edgetorch's runtime within
1e-5 of eager (fp32) or within fp16's rounding bound (``force_fp16``)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from delegate_checks import params, same_hash_seed_as_reference  # tests/support
from vk_cases import eager, fp16_tolerance, lower, run, successive_calls
from vk_models import build, torchao_quantize

from edgetorch.backends.vulkan.serialization.vulkan_graph_schema import VkStorageType
from edgetorch.errors import InvalidArgumentError
from edgetorch.examples import EXAMPLES

pytestmark = [pytest.mark.compat, pytest.mark.torch]

# (model, partitioner options, quantization): what is compared byte for byte
CASES = [
    ("mobilenet_v2", {}, None),
    ("cnn", {}, None),
    ("transformer_encoder", {}, None),
    ("llama_decoder", {}, None),
    ("cnn", {"force_fp16": True}, None),
    ("cnn", {"small_texture_limits": True}, None),
    ("cnn", {"storage_type_override": int(VkStorageType.BUFFER)}, None),
    ("mlp", {}, "w8"),
    ("mlp", {}, "w4"),
    ("mlp", {}, "dyn8"),
    ("accumulator", {}, None),  # a mutable buffer the delegate takes over
    ("accumulator", {"alias_buffer_mutations": True}, None),
    ("rolling_cache", {"alias_buffer_mutations": True}, None),  # a KV-cache-like window
]
IDS = [f"{m}-{'-'.join(map(str, o.items())) or 'default'}-{q or 'fp'}" for m, o, q in CASES]
# The larger models run with ``-m slow`` (``make test-vulkan-coreml-slow``): each costs ExecuTorch a minute.
SLOW = {"mobilenet_v2", "transformer_encoder", "llama_decoder"}



def _options(options: dict) -> dict:
    out = dict(options)
    if "storage_type_override" in out:
        out["storage_type_override"] = VkStorageType(out["storage_type_override"])
    return out


@pytest.fixture(scope="module")
def submitted(vulkan_ref):
    for m, o, q in CASES:  # the default run's all at once, two at a time
        if m not in SLOW:
            vulkan_ref.submit(m, o, q)
    return vulkan_ref


@pytest.mark.parametrize("model, options, quant", params(CASES, SLOW, IDS))
def test_pte_bytes_equal_executorch(model, options, quant, submitted):
    same_hash_seed_as_reference()
    m, inputs = build(model)
    ours = lower(m, inputs, _options(options), quant)
    theirs = submitted.get(model, options, quant).read_bytes()
    assert len(ours) == len(theirs)
    assert ours == theirs


@pytest.mark.parametrize("model", params(["cnn", "mobilenet_v2", "transformer_encoder",
                                           "llama_decoder"], SLOW))
def test_executorch_vulkan_pte_runs_in_edgetorch(model, submitted):
    m, inputs = EXAMPLES[model].build()
    outs, handles = run(submitted.get(model).read_bytes(), inputs)
    for got, want in zip(outs, eager(m, inputs)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert all(h.operators_run for h in handles)


def test_executorch_fp16_vulkan_pte_runs_in_edgetorch(submitted):
    m, inputs = EXAMPLES["cnn"].build()
    outs, (handle, *_) = run(submitted.get("cnn", {"force_fp16": True}).read_bytes(), inputs)
    (want,) = eager(m, inputs)
    assert handle.fp16
    assert np.abs(outs[0] - want).max() <= fp16_tolerance(want, len(handle.calls) + 1)


def test_executorch_refuses_its_own_buffer_mutation_output_and_so_do_we(submitted):
    """Without ``alias_buffer_mutations`` ExecuTorch 1.5.1 serializes the buffer's new value
    as a graph output that the delegate call has no argument for; its Vulkan runtime
    refuses that count mismatch (``VulkanBackend::execute``), and so does edgetorch's."""
    m, inputs = build("accumulator")
    with pytest.raises(InvalidArgumentError, match="1 inputs and 2 outputs"):
        run(submitted.get("accumulator").read_bytes(), inputs)


@pytest.mark.parametrize("model", ["accumulator", "rolling_cache"])
def test_executorch_aliased_buffer_pte_keeps_its_state_in_edgetorch(model, submitted):
    """ExecuTorch's file with ``alias_buffer_mutations``: successive calls in edgetorch's
    runtime follow eager PyTorch doing the same calls."""
    m, inputs = build(model)
    pte = submitted.get(model, {"alias_buffer_mutations": True}).read_bytes()
    pairs, (handle,) = successive_calls(pte, m, inputs)
    for got, want in pairs:
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert len(handle.state_ids) == 1


@pytest.mark.parametrize("quant", ["q4gsw"])
def test_torchao_4bit_linears_delegate_what_executorch_does(quant, vulkan_ref):
    """Two linears under torchao's 4-bit quantization: ExecuTorch's file and ours run the
    same operators, as many times each, in edgetorch's runtime, and both give the quantized
    eager model's numbers."""
    future = vulkan_ref.submit("two_linears", {}, quant)
    m, inputs = build("two_linears")
    ours = lower(m, inputs, {}, quant)
    want = eager(torchao_quantize(build("two_linears")[0], quant), inputs)
    runs = {}
    for side, pte in (("ours", ours), ("executorch", future.result().read_bytes())):
        outs, handles = run(pte, inputs)
        for got, w in zip(outs, want):
            np.testing.assert_allclose(got, w, atol=1e-4, rtol=1e-4)
        runs[side] = sum((Counter(h.operators_run) for h in handles), Counter())
    assert runs["ours"] == runs["executorch"]
    assert runs["ours"].get(f"et_vk.linear_{quant}.default") == 2


def test_torchao_8da4w_linears_fuse_as_executorch_does(vulkan_ref):
    """8da4w: both files call ``et_vk.linear_dq8ca_q4gsw`` once per linear (each call stores
    its operator's name), and ours gives the quantized eager model's numbers. ExecuTorch keeps
    ``torchao.choose_qparams_affine`` whole in its delegate, which edgetorch's runtime has no
    handler for; edgetorch decomposes it, so the per-row scales are computed by ATen ops."""
    future = vulkan_ref.submit("two_linears", {}, "8da4w")
    m, inputs = build("two_linears")
    ours = lower(m, inputs, {}, "8da4w")
    theirs = future.result().read_bytes()
    name = b"et_vk.linear_dq8ca_q4gsw.default"
    assert ours.count(name) == theirs.count(name) == 2
    want = eager(torchao_quantize(build("two_linears")[0], "8da4w"), inputs)
    outs, handles = run(ours, inputs)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, atol=1e-4, rtol=1e-4)
    assert sum(h.operators_run.get(name.decode(), 0) for h in handles) == 2
