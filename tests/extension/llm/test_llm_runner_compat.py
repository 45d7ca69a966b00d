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
    _run_tool([*args, str(out)], 600.0, REF_LLM)
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
