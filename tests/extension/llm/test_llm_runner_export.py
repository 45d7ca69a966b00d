"""The runner on export_llm's output: a tiny random-weight llama with the llama:: custom ops
(update_cache + custom_sdpa), greedy tokens equal to the eager decoder stepped the same way. (The
plain index_put path is the shape of tiny_llm's fixture, covered by test_llm_runner.py.)"""

import json

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
    prompt = "the cat sat on the mat in the sun"  # 27 tokens: four prefill chunks of <= 8
    ids = runner.tokenizer.encode(prompt)
    assert MAX_SEQ * 3 < len(ids) < MAX_CTX - 12
    runner.generate(prompt, GenerationConfig(temperature=0, echo=False, max_new_tokens=12,
                                             ignore_eos=True))
    torch.manual_seed(0)  # load_model builds the same random weights export_llm used
    eager = load_model(cfg).model
    assert runner.generated_ids == eager_greedy(eager, ids, 12, MAX_SEQ)
