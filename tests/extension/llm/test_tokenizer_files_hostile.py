"""Crafted tokenizer files: GGUF metadata, llama2c tokenizer.bin, tokenizer.json and its
configs. Each defect is a ``TokenizerError`` (never IndexError, UnicodeDecodeError, KeyError,
struct.error, a loop over a claimed count, or a crash in a C++ loader)."""

import json
import random
import struct
import time

import pytest

from edgetorch.errors import TokenizerError
from edgetorch.extension.llm import tokenizers as T
from edgetorch.extension.llm.tokenizers.gguf import gguf_tokenizer_spec, read_gguf_tokenizer
from edgetorch.extension.llm.tokenizers.gguf_metadata import read_gguf_metadata

U32, I32, STRING, ARRAY, U64 = 4, 5, 8, 9, 10


def _str(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def _kv(key: str, kind: int, payload: bytes) -> bytes:
    return _str(key.encode()) + struct.pack("<I", kind) + payload


def _strings(items: list[str]) -> bytes:
    return struct.pack("<IQ", STRING, len(items)) + b"".join(_str(t.encode()) for t in items)


def _gguf(*kvs: bytes, version: int = 3, count: int | None = None) -> bytes:
    n = len(kvs) if count is None else count
    return b"GGUF" + struct.pack("<IQQ", version, 0, n) + b"".join(kvs)


TOKENS = ["a", "b", "ab", "<|eos|>"]
VALID = _gguf(
    _kv("general.architecture", STRING, _str(b"llama")),
    _kv("tokenizer.ggml.model", STRING, _str(b"gpt2")),
    _kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),
    _kv("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ4i", I32, 4, 1, 1, 1, 3)),
    _kv("tokenizer.ggml.merges", ARRAY, _strings(["a b"])),
    _kv("tokenizer.ggml.eos_token_id", U32, struct.pack("<I", 3)),
    _kv("tokenizer.chat_template", STRING, _str(b"{{ messages[0]['content'] }}")),
)


def test_a_handmade_gguf_reads_and_converts():
    fields = read_gguf_tokenizer(VALID)
    assert fields["tokenizer.ggml.tokens"] == TOKENS
    spec, config = gguf_tokenizer_spec(fields)
    assert spec["model"]["merges"] == [["a", "b"]] and config["eos_token"] == "<|eos|>"


def test_reads_what_the_gguf_package_writes_in_either_byte_order(tmp_path):
    gguf = pytest.importorskip("gguf")
    for order in (gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG):
        path = str(tmp_path / f"t{order.name}.gguf")
        w = gguf.GGUFWriter(path, "llama", endianess=order)
        w.add_tokenizer_model("gpt2")
        w.add_token_list(TOKENS)
        w.add_token_types([1, 1, 1, 3])
        w.add_token_scores([0.5, -1.0, 2.0, 0.0])
        w.add_array("x.nested", [[1, 2], [3]])
        w.add_token_merges(["a b"])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.close()
        fields = read_gguf_metadata(path)
        assert fields["tokenizer.ggml.tokens"] == TOKENS, order
        assert fields["tokenizer.ggml.scores"] == [0.5, -1.0, 2.0, 0.0]
        assert fields["x.nested"] == [[1, 2], [3]]


HOSTILE = {
    "empty": b"",
    "not gguf": b"PK\x03\x04" + bytes(40),
    "version 1": _gguf(version=1),
    "version 999": _gguf(version=999),
    "key count past the file": _gguf(count=1 << 62),
    "key count just past the file": _gguf(_kv("a", U32, bytes(4)), count=2),
    "key longer than the file": b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 63),
    "key not UTF-8": _gguf(_str(b"\xff\xfe") + struct.pack("<II", U32, 1)),
    "value not UTF-8": _gguf(_kv("tokenizer.ggml.model", STRING, _str(b"gp\xc3"))),
    "unknown value type": _gguf(_kv("tokenizer.x", 77, bytes(8))),
    "array of 2^64 bytes": _gguf(_kv("tokenizer.x", ARRAY, struct.pack("<IQ", 0, (1 << 64) - 1))),
    "array of 2^60 strings skipped": _gguf(_kv("other.x", ARRAY, struct.pack("<IQ", STRING, 1 << 60))),
    "array of unknown items": _gguf(_kv("tokenizer.x", ARRAY, struct.pack("<IQ", 99, 1))),
    "arrays nested 10 deep": _gguf(_kv("tokenizer.x", ARRAY,
                                       struct.pack("<IQ", ARRAY, 1) * 10 + struct.pack("<IQ", 0, 0))),
    "string past the end": _gguf(_kv("tokenizer.ggml.model", STRING, struct.pack("<Q", 1 << 40))),
    "truncated scalar": _gguf(_kv("tokenizer.ggml.eos_token_id", U64, b"\x01\x02")),
    "duplicate key": _gguf(_kv("tokenizer.a", U32, bytes(4)), _kv("tokenizer.a", U32, bytes(4))),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_malformed_gguf_metadata_is_a_tokenizer_error(name, tmp_path):
    start = time.process_time()
    with pytest.raises(TokenizerError, match="GGUF file"):
        read_gguf_tokenizer(HOSTILE[name])
    path = tmp_path / "f.gguf"
    path.write_bytes(HOSTILE[name])
    with pytest.raises(TokenizerError, match="GGUF file"):
        read_gguf_tokenizer(path)
    assert time.process_time() - start < 30  # a hang guard, not a speed test


def _spec_of(*kvs: bytes) -> None:
    gguf_tokenizer_spec(read_gguf_tokenizer(_gguf(_kv("tokenizer.ggml.model", STRING,
                                                      _str(b"gpt2")), *kvs)))


WRONG_FIELDS = {
    "no tokens": ((), "no tokenizer.ggml.tokens"),
    "tokens are ints": ((_kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQi", I32, 1, 5)),),
                        "tokens is list, expected a list of str"),
    "no merges": ((_kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),), "no tokenizer.ggml.merges"),
    "merge without a space": ((_kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),
                               _kv("tokenizer.ggml.merges", ARRAY, _strings(["ab"]))),
                              "merge 0"),
    "bos id is a string": ((_kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),
                            _kv("tokenizer.ggml.merges", ARRAY, _strings(["a b"])),
                            _kv("tokenizer.ggml.bos_token_id", STRING, _str(b"1"))),
                           "bos_token_id is str"),
    "pre is a number": ((_kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),
                         _kv("tokenizer.ggml.merges", ARRAY, _strings(["a b"])),
                         _kv("tokenizer.ggml.pre", U32, bytes(4))), "pre is int"),
    "template is a list": ((_kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),
                            _kv("tokenizer.ggml.merges", ARRAY, _strings(["a b"])),
                            _kv("tokenizer.chat_template", ARRAY, _strings(["x"]))),
                           "chat_template is list"),
}


@pytest.mark.parametrize("name", sorted(WRONG_FIELDS))
def test_wrongly_typed_gguf_fields_are_tokenizer_errors(name):
    kvs, says = WRONG_FIELDS[name]
    with pytest.raises(TokenizerError, match=says):
        _spec_of(*kvs)


def test_out_of_range_special_ids_are_dropped():
    _spec_of(_kv("tokenizer.ggml.tokens", ARRAY, _strings(TOKENS)),
             _kv("tokenizer.ggml.merges", ARRAY, _strings(["a b"])),
             _kv("tokenizer.ggml.bos_token_id", U64, struct.pack("<Q", 1 << 63)))


def test_every_truncation_and_random_mutations_of_a_gguf():
    """Each prefix, and 500 seeded byte mutations, give fields or a TokenizerError."""
    rng = random.Random(28)
    inputs = [VALID[:n] for n in range(len(VALID))]
    for _ in range(500):
        data = bytearray(VALID)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        inputs.append(bytes(data))
    for data in inputs:
        try:
            gguf_tokenizer_spec(read_gguf_tokenizer(data))
        except TokenizerError:
            pass


# ---- llama2c tokenizer.bin: the C++ loader must never see these ---------------------------


def _llama2c(vocab=300, bos=1, eos=2, longest=4, tokens=None) -> bytes:
    tokens = tokens if tokens is not None else \
        [b" ", *(bytes([i % 256]) for i in range(vocab - 1))]
    body = b"".join(struct.pack("<fi", 0.0, len(t)) + t for t in tokens)
    return struct.pack("<4i", vocab, bos, eos, longest) + body


LLAMA2C = {
    "negative length": _llama2c(tokens=[b" "] * 299) + struct.pack("<fi", 0.0, -1) + bytes(64),
    "length past the end": _llama2c(tokens=[b" "] * 299 + [b"toolong"])[:-3],
    "huge vocabulary": _llama2c(vocab=1 << 30, tokens=[b" "] * 300),
    "negative vocabulary": _llama2c(vocab=-5),
    "too small for byte fallback": _llama2c(vocab=100, tokens=[b" "] * 100),
    "bos outside": _llama2c(bos=1 << 20),
    "negative eos": _llama2c(eos=-1),
    "zero max token length": _llama2c(longest=0),
    "no space token": _llama2c(tokens=[b"x"] * 300),
}


@pytest.mark.parametrize("name", sorted(LLAMA2C))
def test_hostile_llama2c_files_are_refused_before_the_cpp_loader(name, tmp_path):
    path = tmp_path / "tokenizer.bin"
    path.write_bytes(LLAMA2C[name])
    with pytest.raises(TokenizerError, match="llama2c"):
        T.load_tokenizer(path)


# ---- tokenizer.json and its configs ----------------------------------------------------------


def _hf_dir(tmp_path, config=None, generation=None):
    from tiny_llm import write_tokenizer

    path = write_tokenizer(str(tmp_path))
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    if generation is not None:
        (tmp_path / "generation_config.json").write_text(json.dumps(generation))
    return path


def test_odd_config_values_are_ignored_or_typed(tmp_path):
    path = _hf_dir(tmp_path, config={"bos_token": {"content": 5}, "eos_token": ["x"],
                                     "chat_template": [7, {"name": "default", "template": "hi"}]},
                   generation={"eos_token_id": ["x", 2.5, True, 1, -3]})
    tok = T.load_tokenizer(path)
    assert tok.bos_id is None and tok.eos_ids == (1,) and tok.chat_template == "hi"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": 12}))
    with pytest.raises(TokenizerError, match="chat_template is int"):
        T.load_tokenizer(path)
    for text in ("{not json", "[" * 100_000 + "]" * 100_000, "\udcff"):
        (tmp_path / "tokenizer_config.json").write_text(text, errors="surrogateescape")
        with pytest.raises(TokenizerError, match="cannot read"):
            T.load_tokenizer(path)


@pytest.mark.parametrize("text", ["", "[]", '{"model": {"type": "BPE", "vocab": 5}}',
                                  '{"version": "1.0", "model": null}', "\xff" * 10])
def test_broken_tokenizer_json_is_a_tokenizer_error(tmp_path, text):
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="latin-1")
    with pytest.raises(TokenizerError, match="not a loadable tokenizer.json"):
        T.load_tokenizer(path)


def _split_tokenizer(tmp_path, pattern: str):
    """A WordLevel tokenizer.json whose pre-tokenizer splits on ``pattern``."""
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "post_processor": None, "decoder": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
                "invert": False}]},
           "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2},
                     "unk_token": "[UNK]"}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(?:\w+\s?)*x", r"((ab)*c)+", r"([a-z]+b){2,}",
                                     r"(?i:(?:\p{L}+)*)", r"(a*)*?"])
def test_a_tokenizer_json_with_an_exponential_regex_is_refused_at_load(tmp_path, pattern):
    with pytest.raises(TokenizerError, match="nests a repetition inside a repetition"):
        T.load_tokenizer(_split_tokenizer(tmp_path, pattern))


def test_the_real_tokenizers_patterns_pass_the_regex_guard():
    from edgetorch.extension.llm.tokenizers.regex_guard import nested_quantifier

    real = [  # GPT-2, Llama 3, Qwen 2, and a normalizer's Replace
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
        r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
        r" {2,}", r"[(+)]+", r"\(+", r"(?:ab)+(?:cd)*", r"([a-z]+)?", r"(a+){2}",
    ]
    assert [nested_quantifier(p) for p in real] == [None] * len(real)


def test_a_regex_panic_at_encode_is_a_tokenizer_error(tmp_path):
    # an ambiguous alternation is not refused at load; Oniguruma's retry limit stops it
    tok = T.load_tokenizer(_split_tokenizer(tmp_path, r"(a|aa)+$"))
    started = time.monotonic()
    with pytest.raises(TokenizerError, match="cannot encode"):
        tok.encode("a" * 60 + "b")
    assert time.monotonic() - started < 60
