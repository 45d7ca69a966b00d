"""A tokenizer.json from the vocabulary and merges inside a GGUF file.

llama.cpp's GGUF files carry their tokenizer as arrays (``tokenizer.ggml.tokens``, ``.merges``,
``.token_type``) plus ids for bos/eos and the chat template. For a byte-level BPE vocabulary
(``tokenizer.ggml.model == "gpt2"``: GPT-2, SmolLM, Llama 3, Qwen...) this rebuilds the same
tokenizer transformers builds from the file (``AutoTokenizer.from_pretrained(d, gguf_file=f)``),
as a plain tokenizer.json that ``tokenizers``, pytorch-tokenizers and ExecuTorch's C++ runner read,
and a tokenizer_config.json with the special tokens and the chat template.

The metadata is read by :mod:`.gguf_metadata` (bounded: the file is untrusted), and every field
this uses is checked for its type, so a malformed file is a ``TokenizerError``, never a
KeyError or IndexError.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ....errors import TokenizerError
from .gguf_metadata import read_gguf_metadata

# llama.cpp's token types (llama_token_type): 3 = CONTROL, 4 = USER_DEFINED.
_CONTROL, _USER_DEFINED = 3, 4

# Pre-tokenizer splits for ``tokenizer.ggml.pre`` values whose merges were learned on a split other
# than GPT-2's. Every other value (gpt2, smollm, ...) keeps GPT-2's regex inside ByteLevel, which is
# also what transformers does for them.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_SPLITS = {name: _LLAMA3_SPLIT for name in ("llama3", "llama-v3", "llama-bpe", "smaug-bpe",
                                             "dbrx", "falcon3")}


def _byte_spelling() -> dict[int, str]:
    """GPT-2's byte -> printable character table (bytes_to_unicode)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def read_gguf_tokenizer(gguf: str | os.PathLike | bytes) -> dict[str, Any]:
    """The ``tokenizer.*`` fields (and ``general.architecture``) of a GGUF file (path or bytes)
    as plain Python values."""
    return read_gguf_metadata(
        gguf, keep=lambda key: key.startswith("tokenizer.") or key == "general.architecture")


def _field(fields: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None,
           items: type | None = None) -> Any:
    """``fields[key]`` checked to be a ``kind`` (a list of ``items``), or ``default``."""
    value = fields.get(key, default)
    if value is default:
        return value
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if ok and items is not None:
        ok = all(isinstance(v, items) for v in value)
    if not ok:
        want = f"a list of {items.__name__}" if items else getattr(kind, "__name__", str(kind))
        raise TokenizerError(f"GGUF field {key} is {type(value).__name__}, expected {want}; the "
                             "file is corrupted or not a llama.cpp tokenizer")
    return value


def gguf_tokenizer_spec(fields: dict[str, Any]) -> tuple[dict, dict]:
    """(tokenizer.json, tokenizer_config.json) contents for a GGUF's ``tokenizer.*`` fields."""
    kind = fields.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise TokenizerError(
            f"GGUF tokenizer model {kind!r} is not supported: only byte-level BPE ('gpt2') is "
            "converted; for a SentencePiece model ('llama') use its tokenizer.model with "
            "load_tokenizer, or convert with transformers")
    tokens: list[str] = _field(fields, "tokenizer.ggml.tokens", list, items=str)
    if not tokens:
        raise TokenizerError("the GGUF file has no tokenizer.ggml.tokens; re-convert the model "
                             "with llama.cpp")
    types: list[int] = _field(fields, "tokenizer.ggml.token_type", list, items=int) or \
        [1] * len(tokens)
    merges: list[str] | None = _field(fields, "tokenizer.ggml.merges", list, items=str)
    if not merges:
        raise TokenizerError("the GGUF file has no tokenizer.ggml.merges; a byte-level BPE "
                             "vocabulary needs them (re-convert the model with llama.cpp)")
    pairs = [m.split(" ", 1) for m in merges]
    bad = next((i for i, p in enumerate(pairs) if len(p) != 2), None)
    if bad is not None:
        raise TokenizerError(f"GGUF merge {bad} ({merges[bad][:40]!r}) is not two tokens "
                             "separated by a space; the file is corrupted")
    spelling = _byte_spelling()
    alphabet = set(spelling.values())

    def spelled(token: str) -> str:
        # Tokens are stored in the byte alphabet already; a few files store raw text instead.
        return token if set(token) <= alphabet else "".join(spelling[b] for b in token.encode())

    vocab = {spelled(t): i for i, t in enumerate(tokens)}
    added = []
    for i, (token, kind_id) in enumerate(zip(tokens, types)):
        # A control token outside the byte alphabet is a mislabel: adding it would grow the
        # vocabulary past the model's, so (like transformers) it stays an ordinary entry.
        if (kind_id == _CONTROL and set(token) <= alphabet) or \
                (kind_id == _USER_DEFINED and token in vocab):
            added.append({"id": i, "content": token, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": kind_id == _CONTROL})
    split = _SPLITS.get(_field(fields, "tokenizer.ggml.pre", str, ""))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": split is None}
    pre = byte_level if split is None else {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
        byte_level]}

    def name(key: str) -> str | None:
        idx = _field(fields, f"tokenizer.ggml.{key}", int)
        return tokens[idx] if idx is not None and 0 <= idx < len(tokens) else None

    bos = name("bos_token_id")
    add_bos = bool(_field(fields, "tokenizer.ggml.add_bos_token", (bool, int), False))
    post = None
    if add_bos and bos is not None:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [vocab[spelled(bos)]],
                                         "tokens": [bos]}}}
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": pre, "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": pairs},
    }
    config = {"bos_token": bos, "eos_token": name("eos_token_id"),
              "unk_token": name("unknown_token_id"), "pad_token": name("padding_token_id"),
              "add_bos_token": add_bos, "tokenizer_class": "PreTrainedTokenizerFast"}
    template = _field(fields, "tokenizer.chat_template", str)
    if template is not None:
        config["chat_template"] = template
    return spec, config


def gguf_to_tokenizer_json(gguf_path: str | os.PathLike | bytes,
                           out_dir: str | os.PathLike) -> str:
    """Write ``out_dir/tokenizer.json`` and ``out_dir/tokenizer_config.json`` for the tokenizer
    inside ``gguf_path``; returns the tokenizer.json path."""
    spec, config = gguf_tokenizer_spec(read_gguf_tokenizer(gguf_path))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(os.fspath(out_dir), "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    with open(os.path.join(os.fspath(out_dir), "tokenizer_config.json"), "w",
              encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    return path
