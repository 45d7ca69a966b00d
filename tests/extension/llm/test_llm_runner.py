"""TextLLMRunner on a tiny exported KV-cache decoder: text, Stats, metadata, chunked prefill,
UTF-8-safe streaming, EOS without get_eos_ids, sampling, and agreement with manual stepping and
eager torch."""

import json

import numpy as np
import pytest
import torch
from tiny_llm import (
    EOS,
    TinyKVDecoder,
    TinyNoCacheDecoder,
    byte_token,
    default_metadata,
    eager_greedy,
    export_no_cache,
    export_tiny,
    without_methods,
    write_tokenizer,
)

from edgetorch.errors import InvalidArgumentError, InvalidProgramError, InvalidStateError
from edgetorch.extension.llm.runner import GenerationConfig, Stats, TextLLMRunner, TextStream
from edgetorch.runtime import Runtime

MAX_SEQ_LEN = 16
GREEDY = dict(temperature=0.0, echo=False)

# "é" is 0xC3 0xA9 and "😀" is F0 9F 98 80: byte tokens that split a character. The scripted
# model answers a prompt ending in "!" with "é😀." and one ending in "?" with "ok.", then EOS.
SCRIPT = [byte_token(b) for b in "é😀.".encode()] + [1]
ASCII_SCRIPT = [byte_token(b) for b in b"ok."] + [1]


def scripted_model() -> TinyKVDecoder:
    successor = {}
    for chain in ([byte_token(ord("!")), *SCRIPT], [byte_token(ord("?")), *ASCII_SCRIPT]):
        successor.update(zip(chain, chain[1:]))
    return TinyKVDecoder(successor=successor, scale=100.0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("llm")
    tok = write_tokenizer(str(d / "tok"))
    random_pte = export_tiny(str(d / "tiny.pte"), TinyKVDecoder(), MAX_SEQ_LEN)
    scripted = scripted_model()
    meta = default_metadata(scripted, MAX_SEQ_LEN)
    meta["get_eos_ids"] = [byte_token(ord("."))]  # the .pte's own stop token: "."
    scripted_pte = export_tiny(str(d / "scripted.pte"), scripted, MAX_SEQ_LEN, meta)
    no_eos = without_methods(scripted_pte, str(d / "no_eos.pte"), {"get_eos_ids"})
    return {"dir": d, "tok": tok, "random": random_pte, "scripted": scripted_pte,
            "no_eos": no_eos}


def test_greedy_text_equals_eager_and_manual_stepping(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    prompt = "hello there"
    pieces = []
    text = runner.generate(prompt, GenerationConfig(max_new_tokens=10, **GREEDY), pieces.append)
    ids = runner.tokenizer.encode(prompt)
    assert runner.generated_ids == eager_greedy(TinyKVDecoder(), ids, 10, MAX_SEQ_LEN)
    # Manual stepping of the same .pte, one token per call after the prompt.
    method = Runtime.get().load_program(files["random"]).load_method("forward")
    logits = method.execute([np.array([ids]), np.array([0])])[0]
    manual, pos = [], len(ids)
    for _ in range(10):
        manual.append(int(logits.argmax()))
        logits = method.execute([np.array([[manual[-1]]]), np.array([pos])])[0]
        pos += 1
    assert runner.generated_ids == manual
    assert "".join(pieces) == text == runner.tokenizer.decode(manual)
    assert runner.pos == len(ids) + 9  # the last sampled token is not fed back yet


def test_echo_streams_prompt_first(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    pieces = []
    runner.generate("hi", GenerationConfig(temperature=0.0, max_new_tokens=3), pieces.append)
    assert pieces[0] == "hi"


def test_long_prompt_is_prefilled_in_chunks(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    prompt = "the cat sat on the mat and then the dog ran in a park"
    ids = runner.tokenizer.encode(prompt)
    assert MAX_SEQ_LEN < len(ids) < runner.max_context_len - 6
    calls = []
    original = runner._forward
    runner._forward = lambda toks: calls.append(len(toks)) or original(toks)
    runner.generate(prompt, GenerationConfig(max_new_tokens=6, **GREEDY))
    assert calls[:3] == [16, 16, len(ids) - 32] and calls[3:] == [1] * 5
    assert runner.generated_ids == eager_greedy(TinyKVDecoder(), ids, 6, MAX_SEQ_LEN)
    assert runner.stats.num_prompt_tokens == len(ids)


def test_prompt_longer_than_context_is_refused(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    with pytest.raises(InvalidArgumentError, match="max_context_len 64"):
        runner.generate("x" * 70, GenerationConfig(**GREEDY))


def test_utf8_character_split_across_tokens_is_held_back(files):
    runner = TextLLMRunner(files["scripted"], files["tok"])
    runner.eos_ids = {1}  # stop at the tokenizer's EOS, after "é😀."
    pieces = []
    text = runner.generate("hi!", GenerationConfig(max_new_tokens=20, **GREEDY), pieces.append)
    assert runner.generated_ids == SCRIPT
    assert text == "é😀."
    assert pieces == ["é", "😀", "."]  # no piece ends inside a character
    assert all("\ufffd" not in p for p in pieces)


def test_text_stream_flushes_an_unfinished_character():
    decode = lambda ids: bytes(ids).decode("utf-8", errors="replace")  # noqa: E731
    stream = TextStream(decode)
    assert [stream.push(b) for b in "a😀".encode()] == ["a", "", "", "", "😀"]
    assert stream.push(0xC3) == ""
    assert stream.flush() == "\ufffd"


def test_eos_from_pte_metadata(files):
    runner = TextLLMRunner(files["scripted"], files["tok"])
    assert runner.eos_ids == {byte_token(ord("."))}
    assert runner.generate("hi!", GenerationConfig(max_new_tokens=20, **GREEDY)) == "é😀."
    assert runner.generated_ids[-1] == byte_token(ord("."))


def test_eos_from_tokenizer_config_without_get_eos_ids(files):
    runner = TextLLMRunner(files["no_eos"], files["tok"])
    assert "get_eos_ids" not in runner.program.method_names
    assert runner.eos_ids == {runner.tokenizer.eos_id} == {1}
    text = runner.generate("hi!", GenerationConfig(max_new_tokens=20, **GREEDY))
    assert runner.generated_ids == SCRIPT and text == "é😀."  # stopped at <|eos|>
    assert runner.stats.num_generated_tokens == len(SCRIPT) - 1
    # ignore_eos runs to the budget instead
    runner.reset()
    runner.generate("hi!", GenerationConfig(max_new_tokens=12, ignore_eos=True, **GREEDY))
    assert len(runner.generated_ids) == 12


def test_tokenizer_without_eos_never_stops_early(files, tmp_path):
    tok = write_tokenizer(str(tmp_path / "tok"), eos=None)
    runner = TextLLMRunner(files["no_eos"], tok)
    assert runner.eos_ids == set()
    runner.generate("hi!", GenerationConfig(max_new_tokens=9, **GREEDY))
    assert len(runner.generated_ids) == 9


def test_metadata_is_read_from_constant_methods(files, tmp_path):
    runner = TextLLMRunner(files["random"], files["tok"])
    assert runner.metadata == {
        "enable_dynamic_shape": 1, "get_max_seq_len": 16, "get_max_context_len": 64,
        "use_kv_cache": 1, "use_sdpa_with_kv_cache": 0, "get_n_layers": 2, "get_bos_id": 0,
        "get_vocab_size": 264}
    assert runner.get_vocab_size() == 264 and runner.prefill_chunk == 16
    # No get_max_context_len: ExecuTorch falls back to max_seq_len.
    short = TextLLMRunner(without_methods(files["random"], str(tmp_path / "a.pte"),
                                          {"get_max_context_len"}), files["tok"])
    assert short.max_context_len == 16
    # No enable_dynamic_shape: one token per prefill call (ExecuTorch's default is False).
    seq = TextLLMRunner(without_methods(files["random"], str(tmp_path / "b.pte"),
                                        {"enable_dynamic_shape"}), files["tok"])
    assert seq.prefill_chunk == 1
    seq.generate("hello there", GenerationConfig(max_new_tokens=4, **GREEDY))
    assert seq.generated_ids == eager_greedy(TinyKVDecoder(), seq.tokenizer.encode("hello there"),
                                             4, 1)
    # No get_max_seq_len: an error naming it, as ExecuTorch refuses such a file.
    with pytest.raises(InvalidProgramError, match="get_max_seq_len"):
        TextLLMRunner(without_methods(files["random"], str(tmp_path / "c.pte"),
                                      {"get_max_seq_len"}), files["tok"])


def test_stats_fields_and_json(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    seen = []
    runner.generate("hello there", GenerationConfig(max_new_tokens=8, **GREEDY),
                    stats_callback=seen.append)
    (st,) = seen
    assert isinstance(st, Stats) and st is runner.stats
    assert st.num_prompt_tokens == 7 and st.num_generated_tokens == 7  # first from prefill
    assert 0 < st.model_load_start_ms <= st.model_load_end_ms <= st.inference_start_ms
    assert st.inference_start_ms <= st.prompt_eval_end_ms == st.first_token_ms
    assert st.first_token_ms <= st.inference_end_ms
    assert st.prefill_tokens_per_second > 0 and st.decode_tokens_per_second > 0
    assert st.time_to_first_token_s > 0 and st.model_load_s > 0
    data = json.loads(st.to_json_string())
    keys = [k for k in data if not k.endswith("_per_sec")]
    assert keys == ["prompt_tokens", "generated_tokens", "model_load_start_ms",
                    "model_load_end_ms", "inference_start_ms", "inference_end_ms",
                    "model_execution_start_ms", "model_execution_end_ms", "prompt_eval_end_ms",
                    "first_token_ms", "aggregate_sampling_time_ms",
                    "aggregate_model_execution_time_ms", "SCALING_FACTOR_UNITS_PER_SECOND"]
    assert data["prompt_tokens"] == 7 and data["generated_tokens"] == 7
    assert "PyTorchObserver {" in st.report()
    runner.reset()  # keeps the load times, as ExecuTorch's Stats.reset()
    assert runner.stats.num_prompt_tokens == 0 and runner.stats.model_load_end_ms > 0
    runner.stats.reset(all_stats=True)
    assert runner.stats.model_load_end_ms == 0


def test_stats_json_rates_use_executorch_formula():
    st = Stats(inference_start_ms=1000, prompt_eval_end_ms=1004, inference_end_ms=1034,
               num_prompt_tokens=7, num_generated_tokens=15)
    data = json.loads(st.to_json_string())
    assert data["prefill_token_per_sec"] == 1750 and data["decode_token_per_sec"] == 500
    assert st.to_json_string().startswith('{"prefill_token_per_sec":1750,')
    assert "prefill_token_per_sec" not in Stats().to_json_string()  # 0 ms: left out


def test_resolve_max_new_tokens_matches_executorch():
    c = GenerationConfig
    assert c().resolve_max_new_tokens(64, 10) == 54
    assert c(max_new_tokens=5).resolve_max_new_tokens(64, 10) == 5
    assert c(seq_len=20).resolve_max_new_tokens(64, 10) == 10
    assert c(seq_len=20, max_new_tokens=3).resolve_max_new_tokens(64, 10) == 3
    assert c(seq_len=5).resolve_max_new_tokens(64, 10) == 0


def test_sampling_is_deterministic_with_a_seed(files):
    runner = TextLLMRunner(files["random"], files["tok"])

    def sample(seed, **kw):
        runner.reset()
        runner.generate("hello there", GenerationConfig(max_new_tokens=12, temperature=1.0,
                                                        seed=seed, echo=False, **kw))
        return list(runner.generated_ids)

    greedy = eager_greedy(TinyKVDecoder(), runner.tokenizer.encode("hello there"), 12, 16)
    a, b = sample(7, top_p=1.0), sample(7, top_p=1.0)
    assert a == b
    assert len({tuple(sample(s, top_p=1.0)) for s in range(5)}) > 1
    assert any(x != y for x, y in zip(a, greedy))
    # A nucleus that keeps only the most likely token is greedy decoding.
    assert sample(3, top_p=1e-6) == greedy


def test_stream_iterator_and_stop(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    cfg = GenerationConfig(max_new_tokens=10, **GREEDY)
    text = runner.generate("hello there", cfg)
    runner.reset()
    assert "".join(runner.stream("hello there", cfg)) == text
    runner.reset()
    n = 0
    for _ in runner.stream("hello there", cfg):
        n += 1
        if n == 2:
            runner.stop()
    assert runner.stats.num_generated_tokens < 9


def test_prefill_then_generate_continues_the_conversation(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    cfg = GenerationConfig(max_new_tokens=5, **GREEDY)
    whole = runner.generate("hello there", cfg)
    runner.reset()
    first = runner.prefill("hello", cfg)  # "hello" + " there" tokenize as "hello there" does
    runner.prefill(" there", cfg)
    assert first >= 0 and runner.pos == len(runner.tokenizer.encode("hello there"))
    assert runner.generate("", cfg) == whole
    runner.reset()
    with pytest.raises(InvalidStateError, match="prefill"):
        runner.generate("", cfg)


def test_reuse_prefix_keeps_the_shared_kv_cache_rows(files):
    """A chat re-rendered each turn: only the tokens after the shared prefix are prefilled,
    and the reply equals a fresh generation on the whole conversation."""
    runner = TextLLMRunner(files["random"], files["tok"])
    cfg = GenerationConfig(max_new_tokens=4, **GREEDY)
    turn1 = "hello there"
    reply1 = runner.generate(turn1, cfg, reuse_prefix=True)
    fed = runner.pos
    turn2 = turn1 + reply1 + " and more"
    reply2 = runner.generate(turn2, cfg, reuse_prefix=True)
    ids2 = runner.tokenizer.encode(turn2)
    assert runner.stats.num_prompt_tokens < len(ids2)  # the shared rows were not fed again
    assert runner.pos == len(ids2) + runner.stats.num_generated_tokens and fed > 0
    fresh = TextLLMRunner(files["random"], files["tok"])
    assert reply2 == fresh.generate(turn2, cfg)
    # A prompt that shares nothing with the cache rewinds it to position 0.
    other = "zzz"
    assert runner.generate(other, cfg, reuse_prefix=True) == TextLLMRunner(
        files["random"], files["tok"]).generate(other, cfg)
    assert runner.stats.num_prompt_tokens == len(runner.tokenizer.encode(other))


def test_num_bos_prepends_the_bos_token(files):
    runner = TextLLMRunner(files["random"], files["tok"])
    runner.generate("hi", GenerationConfig(max_new_tokens=3, num_bos=1, **GREEDY))
    assert runner.stats.num_prompt_tokens == 1 + len(runner.tokenizer.encode("hi"))
    assert runner.generated_ids == eager_greedy(TinyKVDecoder(), [0, *runner.tokenizer.encode(
        "hi")], 3, 16)


def test_chat_template_renders_messages(files):
    runner = TextLLMRunner(files["scripted"], files["tok"])
    prompt = runner.tokenizer.apply_chat_template([{"role": "user", "content": "hi!"}])
    assert prompt == "<|bos|>user: hi!\n<|bos|>assistant: "
    assert runner.tokenizer.encode(prompt)[0] == 0  # the special token stays whole
    assert EOS in open(files["dir"] / "tok" / "tokenizer_config.json").read()


def test_runner_does_not_import_torch(files):
    from torchless import run_without_torch

    code = (f"from edgetorch.extension.llm.runner import TextLLMRunner, GenerationConfig\n"
            f"r = TextLLMRunner({str(files['scripted'])!r}, {files['tok']!r})\n"
            "print(r.generate('hi!', GenerationConfig(temperature=0, echo=False)))\n"
            "import sys; assert 'torch' not in sys.modules\n")
    proc = run_without_torch(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("é😀.")


def test_cli_llm_run(files, capsys):
    from edgetorch.cli import main

    assert main(["llm", "run", str(files["scripted"]), "--tokenizer", files["tok"],
                 "--prompt", "hi!", "--temperature", "0", "--stats"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hi!é😀.") and "PyTorchObserver" in out
    assert main(["llm", "run", str(files["scripted"]), "--tokenizer", files["tok"],
                 "--prompt", "hi!", "--temperature", "0", "--chat", "--no-echo"]) == 0
    assert "<|bos|>" not in capsys.readouterr().out


def test_manual_stepping_matches_eager_logits(files):
    """The fixture itself: the .pte's logits equal eager torch at every decode position."""
    model = TinyKVDecoder()
    method = Runtime.get().load_program(files["random"]).load_method("forward")
    ids = [5, 9, 200, 17, 3]
    with torch.no_grad():
        ref = model(torch.tensor([ids]), torch.tensor([0])).numpy()
        got = method.execute([np.array([ids]), np.array([0])])[0]
        np.testing.assert_allclose(got, ref, atol=1e-5)
        for pos, tok in enumerate([7, 8, 9], start=len(ids)):
            ref = model(torch.tensor([[tok]]), torch.tensor([pos])).numpy()
            got = method.execute([np.array([[tok]]), np.array([pos])])[0]
            np.testing.assert_allclose(got, ref, atol=1e-5)


def test_cli_llm_chat_and_tokenizer(files, tmp_path, monkeypatch, capsys):
    import io

    from edgetorch.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO("hi?\nhi!\nand more\n\n"))
    assert main(["llm", "chat", str(files["random"]), "--tokenizer", files["tok"],
                 "--temperature", "0", "--max-new-tokens", "8"]) == 0
    replies = capsys.readouterr().out.split("\n")[:3]
    # Turn one is the template's prompt for the first message; later turns re-render the whole
    # conversation (dropping the oldest exchange once it outgrows the 64-token context).
    runner = TextLLMRunner(files["random"], files["tok"])
    cfg = GenerationConfig(max_new_tokens=8, **GREEDY)
    first = runner.tokenizer.apply_chat_template([{"role": "user", "content": "hi?"}])
    assert replies[0] == runner.generate(first, cfg)
    history = [{"role": "user", "content": "hi?"}, {"role": "assistant", "content": replies[0]},
               {"role": "user", "content": "hi!"}]
    runner.reset()
    assert replies[1] == runner.generate(runner.tokenizer.apply_chat_template(history), cfg)
    assert len(replies) == 3
    assert main(["llm", "tokenizer", str(tmp_path / "missing.gguf"), "-o", str(tmp_path)]) == 2


def test_forward_without_kv_cache_runs_on_the_whole_sequence(files, tmp_path):
    pte = export_no_cache(str(tmp_path / "nocache.pte"), TinyNoCacheDecoder(TinyKVDecoder()))
    runner = TextLLMRunner(pte, files["tok"])
    assert runner.metadata["use_kv_cache"] == 0 and not runner._use_kv_cache
    runner.generate("hello there", GenerationConfig(max_new_tokens=8, **GREEDY))
    ids = runner.tokenizer.encode("hello there")
    assert runner.generated_ids == eager_greedy(TinyKVDecoder(), ids, 8, MAX_SEQ_LEN)
