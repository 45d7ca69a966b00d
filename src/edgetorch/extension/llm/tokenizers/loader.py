"""One small interface over the tokenizer formats ExecuTorch's runner accepts.

ExecuTorch's C++ runner tries, in order: a HuggingFace tokenizer.json, tiktoken, SentencePiece,
then llama2c's ``tokenizer.bin``. :func:`load_tokenizer` does the same with pytorch-tokenizers'
classes and fills in what those leave out: a tokenizer.json's bos/eos come from the
tokenizer_config.json (and generation_config.json) next to it rather than from a guess, the
``num_bos``/``num_eos`` counts are honoured for every format, and the chat template is kept.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from typing import Any

from ....errors import TokenizerError
from .regex_guard import check_tokenizer_json


class TextTokenizer:
    """What the runner needs: ids in, text out, the special ids and the chat template."""

    def __init__(self, backend: Any, kind: str, path: str, bos_id: int | None,
                 eos_ids: Sequence[int], vocab_size: int, chat_template: str | None = None,
                 special_names: dict[str, str | None] | None = None) -> None:
        self.backend, self.kind, self.path = backend, kind, path
        self.bos_id = bos_id
        self.eos_ids = tuple(dict.fromkeys(int(i) for i in eos_ids if i is not None))
        self.vocab_size = int(vocab_size)
        self.chat_template = chat_template
        self._special_names = special_names or {}
        self._template: Any = None  # the compiled ChatTemplate, made on first use

    @property
    def eos_id(self) -> int | None:
        return self.eos_ids[0] if self.eos_ids else None

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list[int]:
        """Token ids of ``text`` with ``bos`` BOS ids before and ``eos`` EOS ids after (counts,
        as ExecuTorch's C++ tokenizers take them)."""
        try:
            ids = self._encode(text)
        except BaseException as e:  # the Rust libraries panic (e.g. a regex's retry limit)
            if not _foreign_failure(e):
                raise
            raise TokenizerError(f"{self.path}: cannot encode the text: {str(e)[:300]}") from e
        for count, tok, name in ((bos, self.bos_id, "BOS"), (eos, self.eos_id, "EOS")):
            if count and tok is None:
                raise TokenizerError(f"{self.path}: {count} {name} token(s) requested, but the "
                                     f"tokenizer has no {name} id; set num_bos/num_eos to 0 or "
                                     "name the token in tokenizer_config.json")
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def _encode(self, text: str) -> list[int]:
        if self.kind == "hf":
            return list(self.backend.model.encode(text, add_special_tokens=False).ids)
        if self.kind == "tiktoken":
            return list(self.backend.encode(text, bos=False, eos=False, allowed_special="all"))
        if self.kind == "llama2c":
            return list(self.backend.encode(text, 0, 0))
        return list(self.backend.encode(text, bos=False, eos=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; special tokens are dropped, invalid UTF-8 becomes U+FFFD."""
        ids = [int(i) for i in ids]
        try:
            return self._decode(ids)
        except BaseException as e:  # e.g. an id outside the vocabulary in the Rust decoder
            if not _foreign_failure(e):
                raise
            raise TokenizerError(f"{self.path}: cannot decode {len(ids)} ids: {str(e)[:300]}"
                                 ) from e

    def _decode(self, ids: list[int]) -> str:
        if self.kind == "hf":
            return self.backend.model.decode(ids, skip_special_tokens=True)
        if self.kind == "llama2c":  # the C++ binding decodes one token at a time
            return "".join(_llama2c_piece(self.backend, t) for t in ids)
        return self.backend.decode(ids)

    def apply_chat_template(self, messages: list[dict[str, str]],
                            add_generation_prompt: bool = True,
                            limits: Any = None) -> str:
        """The prompt for ``messages`` ([{"role": ..., "content": ...}]) by the model's Jinja
        chat template (from tokenizer_config.json), as transformers renders it, inside the
        sandbox and work limits of :class:`~.chat_template.ChatTemplate` (``limits``: a
        ``TemplateLimits``)."""
        if not self.chat_template:
            raise TokenizerError(f"{self.path}: no chat template; put a 'chat_template' into the "
                                 "tokenizer_config.json next to tokenizer.json")
        try:
            from .chat_template import ChatTemplate
        except ImportError as e:
            raise TokenizerError(f"chat templates need jinja2 ({e}); pip install 'edgetorch[llm]'"
                                 ) from e
        if self._template is None or limits is not None:
            template = ChatTemplate(self.chat_template, f"the chat template of {self.path}",
                                    limits)
            if limits is not None:
                return self._render(template, messages, add_generation_prompt)
            self._template = template
        return self._render(self._template, messages, add_generation_prompt)

    def _render(self, template: Any, messages: list[dict[str, str]],
                add_generation_prompt: bool) -> str:
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               **{k: v for k, v in self._special_names.items() if v is not None})

    def __repr__(self) -> str:
        return (f"TextTokenizer({self.kind}, {self.path!r}, vocab {self.vocab_size}, "
                f"bos {self.bos_id}, eos {list(self.eos_ids)})")


def _llama2c_piece(backend: Any, tok: int) -> str:
    try:
        return backend.decode(tok)
    except UnicodeDecodeError:  # a byte token that is part of a character
        return "\ufffd"


def _token_name(value: Any) -> str | None:
    """tokenizer_config.json writes a special token as a string or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _ids(value: Any) -> list[int]:
    """Token ids from a JSON value (an id or a list of ids); anything else is ignored."""
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]


def _foreign_failure(e: BaseException) -> bool:
    """An error a tokenizer library raised: any Exception, or the PanicException of the Rust
    libraries (tokenizers, tiktoken), which pyo3 derives from BaseException."""
    return isinstance(e, Exception) or type(e).__name__ == "PanicException"


_MAX_CONFIG_BYTES = 16 << 20  # tokenizer_config.json / generation_config.json: a few KB


# tokenizer.json: Llama 3's is 9 MB, Gemma's 33 MB
_MAX_TOKENIZER_BYTES = 512 << 20


def _read_json(path: str, limit: int = _MAX_CONFIG_BYTES,
               what: str = "a tokenizer's config is a few kilobytes") -> dict:
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
        if len(raw) > limit:
            raise TokenizerError(f"{path} is larger than {limit} bytes; {what}")
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise TokenizerError(f"cannot read {path}: {str(e)[:200]}") from None
    return data if isinstance(data, dict) else {}


def _load_hf(path: str, config_path: str | None) -> TextTokenizer:
    from pytorch_tokenizers import HuggingFaceTokenizer

    try:  # its regexes run on every prompt: refuse exponential ones before the library sees them
        document = _read_json(path, _MAX_TOKENIZER_BYTES, "the largest real ones are tens of "
                              "megabytes")
    except TokenizerError as e:
        raise TokenizerError(f"{path} is not a loadable tokenizer.json: {e}") from None
    check_tokenizer_json(document, path)
    try:
        backend = HuggingFaceTokenizer(path)
    except BaseException as e:  # the tokenizers library raises its own types, even panics
        if not _foreign_failure(e):
            raise
        raise TokenizerError(f"{path} is not a loadable tokenizer.json: {str(e)[:300]}") from e
    folder = os.path.dirname(os.path.abspath(path))
    config_path = config_path or os.path.join(folder, "tokenizer_config.json")
    config = _read_json(config_path) if os.path.isfile(config_path) else {}
    names = {k: _token_name(config.get(k)) for k in ("bos_token", "eos_token", "unk_token",
                                                     "pad_token")}
    model = backend.model

    def tid(name: str | None) -> int | None:
        return model.token_to_id(name) if name else None

    bos = tid(names["bos_token"]) if config else backend.bos_id
    eos_ids: list[int | None] = [tid(names["eos_token"])] if config else [backend.eos_id]
    gen_path = os.path.join(folder, "generation_config.json")
    if os.path.isfile(gen_path):  # HF models list every stop id here (e.g. Llama 3's three)
        eos_ids += _ids(_read_json(gen_path).get("eos_token_id"))
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        template = next((t.get("template") for t in template
                         if isinstance(t, dict) and t.get("name") == "default"), None)
    if template is not None and not isinstance(template, str):
        raise TokenizerError(f"{config_path}: chat_template is {type(template).__name__}, not a "
                             "string; fix or remove it")
    return TextTokenizer(backend, "hf", path, bos, eos_ids, backend.n_words, template, names)


def load_tokenizer(path: str | os.PathLike, config_path: str | None = None) -> TextTokenizer:
    """Open a tokenizer file (or a directory holding tokenizer.json / tokenizer.model).

    ``config_path`` is the tokenizer_config.json of a tokenizer.json (default: the one next to
    it). Raises :class:`~edgetorch.errors.TokenizerError` naming every format tried."""
    path = os.fspath(path)
    if os.path.isdir(path):
        for name in ("tokenizer.json", "tokenizer.model", "tokenizer.bin"):
            if os.path.isfile(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
    if not os.path.isfile(path):
        raise TokenizerError(f"tokenizer {path!r} does not exist; pass a tokenizer.json, "
                             "tokenizer.model (SentencePiece), tiktoken or tokenizer.bin file")
    try:
        import pytorch_tokenizers as pt
    except ImportError as e:
        raise TokenizerError(f"loading {path} needs pytorch-tokenizers ({e}); install it with "
                             "pip install 'edgetorch[llm]'") from e
    if path.endswith(".json"):
        return _load_hf(path, config_path)
    errors = []
    try:  # tiktoken (Llama 3's format), as ExecuTorch tries it before SentencePiece
        tk = pt.TiktokenTokenizer(model_path=path)
        # Llama 3 instruct ends a turn with <|eot_id|> rather than <|end_of_text|>.
        stops = [tk.special_tokens[t] for t in ("<|eot_id|>", "<|eom_id|>")
                 if t in tk.special_tokens]
        return TextTokenizer(tk, "tiktoken", path, tk.bos_id, [tk.eos_id, *stops], tk.n_words)
    except BaseException as e:  # each format's parser raises its own exception types
        if not _foreign_failure(e):
            raise
        errors.append(f"tiktoken: {e}")
    try:
        sp = pt.Llama2cTokenizer(model_path=path)
        return TextTokenizer(sp, "sentencepiece", path, sp.bos_id, [sp.eos_id], sp.n_words)
    except Exception as e:
        errors.append(f"sentencepiece: {e}")
    try:
        check_llama2c_bin(path)  # the C++ loader trusts every length in the file
        bpe = pt.CppLlama2cTokenizer()
        bpe.load(path)
        return TextTokenizer(bpe, "llama2c", path, bpe.bos_tok(), [bpe.eos_tok()],
                             bpe.vocab_size())
    except Exception as e:
        errors.append(f"llama2c: {e}")
    raise TokenizerError(f"{path} is not a tokenizer in any known format ("
                         + "; ".join(str(x)[:120] for x in errors)
                         + "); pass a tokenizer.json, tokenizer.model, tiktoken or tokenizer.bin")


_LLAMA2C_HEADER = struct.Struct("<4i")  # vocab size, bos, eos, max token length
_LLAMA2C_MAX_BYTES = 64 << 20  # Llama 2's tokenizer.bin is ~0.5 MB
_BYTE_FALLBACK = 259  # encode emits ids byte + 3, so every byte needs an entry


def check_llama2c_bin(path: str) -> None:
    """Refuse a ``tokenizer.bin`` that pytorch-tokenizers' C++ loader would read out of bounds.

    That loader allocates what the header and each length claim and reads into it unchecked (a
    negative length overflows the heap); its encoder indexes the vocabulary with byte + 3 and
    with the id of " ". So: the file is small, the header's ids lie inside the vocabulary, every
    length is non-negative and inside the file, and " " is a token."""
    with open(path, "rb") as f:
        data = f.read(_LLAMA2C_MAX_BYTES + 1)
    if len(data) > _LLAMA2C_MAX_BYTES or len(data) < _LLAMA2C_HEADER.size:
        raise TokenizerError(f"{path}: {len(data)} bytes is no llama2c tokenizer.bin")
    vocab, bos, eos, longest = _LLAMA2C_HEADER.unpack_from(data)
    entries = (len(data) - _LLAMA2C_HEADER.size) // 8  # each takes 8 bytes at least
    if not (_BYTE_FALLBACK <= vocab <= entries and 0 <= bos < vocab and 0 <= eos < vocab
            and 1 <= longest <= 1 << 16):
        raise TokenizerError(f"{path}: llama2c header (vocab {vocab}, bos {bos}, eos {eos}, max "
                             f"token length {longest}) is out of range")
    pos, space = _LLAMA2C_HEADER.size, False
    for i in range(vocab):
        if pos + 4 > len(data):  # the loader pads a short vocabulary with <pad>
            break
        if pos + 8 > len(data):
            raise TokenizerError(f"{path}: llama2c token {i} is cut off")
        (n,) = struct.unpack_from("<i", data, pos + 4)
        if not 0 <= n <= len(data) - pos - 8:
            raise TokenizerError(f"{path}: llama2c token {i} claims {n} bytes at offset {pos}")
        space = space or data[pos + 8:pos + 8 + n] == b" "
        pos += 8 + n
    if not space:
        raise TokenizerError(f"{path}: the llama2c vocabulary has no ' ' token, which its "
                             "encoder needs")
