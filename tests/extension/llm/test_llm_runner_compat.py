"""The runner against ExecuTorch 1.5.1 on the same .pte: its TextLLMRunner's text and manual
stepping in its runtime give the same greedy tokens as edgetorch's runner."""

import json
from pathlib import Path

import pytest
from refenv import _run_tool, ref_available
from test_llm_runner import ASCII_SCRIPT, MAX_SEQ_LEN, SCRIPT, scripted_model
from tiny_llm import TinyKVDecoder, default_metadata, export_tiny, write_tokenizer

from edgetorch.extension.llm.runner import GenerationConfig, TextLLMRunner

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]
REF_LLM = Path(__file__).resolve().parents[2] / "compat" / "ref_llm_runner.py"


def ref_llm(*args: str, tmp: Path) -> dict:
    out = tmp / "ref.json"
    flags = [a for a in args if a.startswith("--")]
    _run_tool([*[a for a in args if a not in flags], str(out), *flags], 600.0, REF_LLM)
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("llmcompat")
    model = scripted_model()
    meta = default_metadata(model, MAX_SEQ_LEN)
    meta["get_eos_ids"] = [1]
    return {"dir": d, "tok": write_tokenizer(str(d / "tok")),
            "random": export_tiny(str(d / "tiny.pte"), TinyKVDecoder(), MAX_SEQ_LEN),
            "scripted": export_tiny(str(d / "scripted.pte"), model, MAX_SEQ_LEN, meta)}


def test_executorch_text_llm_runner_gives_the_same_text(files, tmp_path):
    ours = TextLLMRunner(files["scripted"], files["tok"])
    pieces = []
    ours.generate("hi?", GenerationConfig(temperature=0, echo=False, max_new_tokens=10),
                  pieces.append)
    theirs = ref_llm("generate", files["scripted"], files["tok"], "hi?", "10", tmp=tmp_path)
    assert ours.generated_ids == ASCII_SCRIPT
    # ExecuTorch's HF tokenizer decodes the EOS token as its text; ours drops special tokens.
    assert theirs["pieces"] == [*pieces, "<|eos|>"]
    assert theirs["stats"]["generated_tokens"] == ours.stats.num_generated_tokens
    assert theirs["stats"]["prompt_tokens"] == ours.stats.num_prompt_tokens


def test_executorch_runner_raises_on_a_split_utf8_character(files, tmp_path):
    """ExecuTorch 1.5.1's bug that this runner fixes: a token ending inside a character."""
    theirs = ref_llm("generate", files["scripted"], files["tok"], "hi!", "10", tmp=tmp_path)
    assert theirs["error"].startswith("UnicodeDecodeError")
    ours = TextLLMRunner(files["scripted"], files["tok"])
    assert ours.generate("hi!", GenerationConfig(temperature=0, echo=False)) == "é😀."
    assert ours.generated_ids == SCRIPT


def test_manual_stepping_in_executorch_equals_our_runner(files, tmp_path):
    ours = TextLLMRunner(files["random"], files["tok"])
    prompt = "hello there"
    ours.generate(prompt, GenerationConfig(temperature=0, echo=False, max_new_tokens=12,
                                           ignore_eos=True))
    ids = ours.tokenizer.encode(prompt)
    theirs = ref_llm("step", files["random"], json.dumps(ids), "12", tmp=tmp_path)
    assert theirs["ids"] == ours.generated_ids


def test_prompt_of_max_seq_len_tokens_on_export_llm_program(tmp_path):
    """ExecuTorch's export (and export_llm) declares tokens [1, max_seq_len - 1], yet 1.5.1's
    runner prefills chunks of max_seq_len: an 8-token prompt fails there ("Attempted to resize a
    bounded tensor with a maximum capacity of 7 elements to 8 elements"). Ours chunks by 7."""
    import torch
    from test_llm_runner_export import MAX_CTX, MAX_SEQ, PARAMS
    from tiny_llm import eager_greedy

    from edgetorch.extension.llm.export.builder import export_llm, load_model
    from edgetorch.extension.llm.export.config.llm_config import LlmConfig

    (tmp_path / "params.json").write_text(json.dumps(PARAMS))
    cfg = LlmConfig.from_args([
        f"base.params={tmp_path / 'params.json'}", "model.use_kv_cache=True",
        "model.use_sdpa_with_kv_cache=True", f"export.max_seq_length={MAX_SEQ}",
        f"export.max_context_length={MAX_CTX}", f"export.output_dir={tmp_path}",
        "export.output_name=tiny_llama"])
    pte = str(export_llm(cfg))
    tok = write_tokenizer(str(tmp_path / "tok"))
    prompt = "abcdefgh"
    ours = TextLLMRunner(pte, tok)
    assert len(ours.tokenizer.encode(prompt)) == MAX_SEQ
    ours.generate(prompt, GenerationConfig(temperature=0, echo=False, max_new_tokens=4,
                                           ignore_eos=True))
    torch.manual_seed(0)
    eager = load_model(cfg).model
    assert ours.generated_ids == eager_greedy(eager, ours.tokenizer.encode(prompt), 4, MAX_SEQ)
    theirs = ref_llm("generate", pte, tok, prompt, "4", "--custom-ops", tmp=tmp_path)
    assert theirs["error"] == "RuntimeError: Generation failed"
