"""ExecuTorch 1.5.1 and edgetorch exchange .pte files that call the llama:: custom ops
(update_cache + custom_sdpa, sdpa_with_kv_cache, custom_sdpa with a float mask), XNNPACK
lowered, across prefill and decode steps (tests/compat/llm_models.py is shared by both)."""

from __future__ import annotations

import json

import llm_models
import numpy as np
import pytest
import ref_process
import torch
from refenv import REF_TOOL, _clean_env, load_npz, ref_available, ref_python  # noqa: I001

import edgetorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (before llm_models)
from edgetorch.runtime import Runtime

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]
REF_LLM = REF_TOOL.with_name("ref_llm.py")


def _ref(*args: str) -> None:
    cmd = [str(ref_python()), str(REF_LLM), *args]
    r = ref_process.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[-4000:]}"


def _run_ours(pte) -> list[np.ndarray]:
    method = Runtime.get().load_program(pte).load_method("forward")
    return [np.asarray(method.execute([t.numpy(), p.numpy()])[0]) for t, p in llm_models.steps()]


def _eager(variant: str) -> list[np.ndarray]:
    model = llm_models.build(variant)
    with torch.no_grad():
        return [model(t, p).numpy() for t, p in llm_models.steps()]


@pytest.mark.parametrize("variant", llm_models.VARIANTS)
def test_executorchs_pte_runs_in_ours(variant, tmp_path):
    pte = tmp_path / "et.pte"
    _ref("export", variant, str(pte))
    expected = load_npz(pte.with_suffix(".expected.npz"))
    for got, want, ours in zip(_run_ours(pte), expected, _eager(variant)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)  # same op semantics


@pytest.mark.parametrize("variant", llm_models.VARIANTS)
def test_our_pte_runs_in_executorch(variant, tmp_path):
    from edgetorch.backends.xnnpack.partition import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    ep = llm_models.export(llm_models.build(variant))
    pte = tmp_path / "ours.pte"
    pte.write_bytes(to_edge_transform_and_lower(
        ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    np.savez(tmp_path / "steps.npz", *[a.numpy() for pair in llm_models.steps() for a in pair])
    _ref("run", str(pte), str(tmp_path / "steps.npz"), str(tmp_path / "out.npz"))
    for theirs, ours, want in zip(load_npz(tmp_path / "out.npz"), _run_ours(pte),
                                  _eager(variant)):
        np.testing.assert_allclose(theirs, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)


def _quantize_8da4w(model: torch.nn.Module) -> torch.nn.Module:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    quantize_(model, Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
        filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear))
    return model


@pytest.mark.parametrize("mode", ["portable", "8da4w_xnnpack"])
def test_index_copy_decoder_runs_in_executorch(mode, tmp_path):
    """A KV-cache decoder in plain torch ops (caches written by index_copy_, masked SDPA over
    the whole cache, a dynamic token dim, llama metadata as constant methods), exported by
    edgetorch with no partitioner or as 8da4w for XNNPACK: ExecuTorch 1.5.1's runtime runs it
    (the issue saw it abort in toTensor()) over prefill and decode steps, as ours does."""
    from edgetorch.backends.xnnpack.partition import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    model = llm_models.build("index_copy+sdpa")
    if mode == "8da4w_xnnpack":
        model = _quantize_8da4w(model)
    ep = llm_models.export(model)
    parts = [XnnpackPartitioner()] if mode == "8da4w_xnnpack" else []
    pte = tmp_path / "ours.pte"
    pte.write_bytes(to_edge_transform_and_lower(
        ep, partitioner=parts, constant_methods=llm_models.METADATA).to_executorch().buffer)
    np.savez(tmp_path / "steps.npz", *[a.numpy() for pair in llm_models.steps() for a in pair])
    _ref("run", str(pte), str(tmp_path / "steps.npz"), str(tmp_path / "out.npz"))
    meta = json.loads((tmp_path / "out.json").read_text())
    assert meta == {k: v if isinstance(v, list) else [v] for k, v in llm_models.METADATA.items()}
    model = llm_models.build("index_copy+sdpa")  # fresh caches
    if mode == "8da4w_xnnpack":
        model = _quantize_8da4w(model)
    with torch.no_grad():
        eager = [model(t, p).numpy() for t, p in llm_models.steps()]
    # float32: the same operations in another order (1e-5). 8da4w: both runtimes quantize
    # each activation row to int8 as eager's fake quantization does, but round it after
    # other float32 arithmetic, so a row may differ by one int8 step (scale = row range/255)
    # times a weight; with these logits that stays under 2e-2.
    tol = 1e-5 if mode == "portable" else 2e-2
    for theirs, ours, want in zip(load_npz(tmp_path / "out.npz"), _run_ours(pte), eager,
                                  strict=True):
        np.testing.assert_allclose(theirs, want, rtol=tol, atol=tol)
        np.testing.assert_allclose(ours, want, rtol=tol, atol=tol)


class _TwoLinears(torch.nn.Module):
    """SmolLM2's FFN shapes (576 -> 1536 -> 576) for a decode row and a 5-token prefill."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(576, 1536, bias=False)
        self.down = torch.nn.Linear(1536, 576, bias=False)

    def forward(self, one: torch.Tensor, five: torch.Tensor):
        return self.down(self.up(one)), self.down(self.up(five))


def test_8da4w_linear_is_bit_exact_with_executorch(tmp_path):
    """qdint8 x qbint4 fully connected (8da4w, group 32, hqq scales as export_llm makes them):
    a decode row gives ExecuTorch's XNNPACK results bit for bit; a 5-row prefill differs in the
    last bits of a few values (measured 4 of 2880, <= 2e-6: XNNPACK's multi-row kernel folds the
    input zero point in through a float ksum, we fold it into the exact integer sums)."""
    from refenv import ref_run
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    from edgetorch.backends.xnnpack.partition import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    torch.manual_seed(3)
    model = _TwoLinears().eval()
    quantize_(model, Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(32),
        intx_choose_qparams_algorithm="hqq_scale_only"))
    one, five = torch.randn(1, 1, 576) * 3, torch.randn(1, 5, 576) * 3
    five[0, 2, 7] = 60.0  # an outlier row: a coarse activation scale
    with torch.no_grad():
        ep = torch.export.export(model, (one, five), strict=True)
    pte = tmp_path / "two_linears.pte"
    pte.write_bytes(to_edge_transform_and_lower(
        ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    inputs = [one.numpy(), five.numpy()]
    ours = Runtime.get().load_program(pte).load_method("forward").execute(inputs)
    theirs = ref_run(pte, inputs)
    np.testing.assert_array_equal(np.asarray(ours[0]), theirs[0])
    got, want = np.asarray(ours[1]), theirs[1]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert np.mean(got != want) < 0.01
