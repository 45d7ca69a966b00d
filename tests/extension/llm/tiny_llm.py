"""Test fixtures for the LLM runner: a tiny KV-cache decoder exported to a .pte, and a tiny
byte-level BPE tokenizer.json.

The decoder has the shape ExecuTorch's runners expect: ``forward(tokens [1, S] int64 with a
dynamic S, input_pos [1] int64) -> logits of the last position [1, V]``, KV caches as mutable
buffers written at ``input_pos``, and the metadata as constant methods. Its logits also get
``scale * onehot(successor[token])`` so a test can dictate what greedy decoding emits (a byte that
splits a UTF-8 character, an EOS) while attention over the cache still shapes the rest.
"""

from __future__ import annotations

import json
import os

import torch
from torch import nn
from torch.nn import functional as F

# ---- tokenizer --------------------------------------------------------------------------

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]
CHAT_TEMPLATE = ("{% for m in messages %}<|bos|>{{ m['role'] }}: {{ m['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}<|bos|>assistant: {% endif %}")


def _byte_alphabet() -> list[str]:
    """GPT-2's printable spelling of the 256 bytes, in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    spelled = dict(zip(bs, cs))
    return [chr(spelled[b]) for b in range(256)]


def tokenizer_vocab() -> dict[str, int]:
    """Specials first (0..2), then the 256 bytes (3..258), then the merges."""
    vocab = {BOS: 0, EOS: 1, PAD: 2}
    for b, ch in enumerate(_byte_alphabet()):
        vocab[ch] = 3 + b
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    return vocab


def byte_token(b: int) -> int:
    return 3 + b


def write_tokenizer(directory: str, eos: str | None = EOS) -> str:
    """Write tokenizer.json (+ tokenizer_config.json naming bos/eos and a chat template)."""
    os.makedirs(directory, exist_ok=True)
    vocab = tokenizer_vocab()
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in (BOS, EOS, PAD)]
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in MERGES]},
    }
    path = os.path.join(directory, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    config = {"bos_token": BOS, "eos_token": eos, "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path


VOCAB = len(tokenizer_vocab())

# ---- model ------------------------------------------------------------------------------


class TinyKVDecoder(nn.Module):
    """Two attention layers over static KV caches (``[1, H, max_ctx, D]`` mutable buffers)."""

    def __init__(self, vocab: int = VOCAB, dim: int = 32, n_layers: int = 2, n_heads: int = 2,
                 max_context_len: int = 64, successor: dict[int, int] | None = None,
                 scale: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.n_heads, self.head_dim, self.max_ctx = n_heads, dim // n_heads, max_context_len
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_context_len, dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim, bias=False) for _ in range(n_layers))
        self.out = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(n_layers))
        self.head = nn.Linear(dim, vocab, bias=False)
        with torch.no_grad():
            self.head.weight.mul_(4.0)  # peaky enough that sampling tests see a real choice
        shape = (1, n_heads, max_context_len, self.head_dim)
        for i in range(n_layers):
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape))
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape))
        self.register_buffer("mask", torch.tril(torch.ones(max_context_len, max_context_len,
                                                           dtype=torch.bool)))
        table = torch.zeros(vocab, vocab)
        for src, dst in (successor or {}).items():
            table[src, dst] = scale
        self.register_buffer("transition", table)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        # Positions as a tensor (no .item()): cache rows and mask rows are gathered by index.
        positions = torch.arange(seq) + input_pos
        x = self.tok(tokens) + self.pos(positions).unsqueeze(0)
        mask = self.mask.index_select(0, positions)
        for i, (qkv, out) in enumerate(zip(self.qkv, self.out)):
            q, k, v = qkv(x).view(1, seq, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            k_cache, v_cache = getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}")
            k_cache.index_copy_(2, positions, k)
            v_cache.index_copy_(2, positions, v)
            att = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
            x = x + out(att.transpose(1, 2).reshape(1, seq, -1))
        logits = self.head(x[:, -1, :])
        return logits + self.transition[tokens[:, -1]]


def export_tiny(path: str, model: TinyKVDecoder, max_seq_len: int = 16,
                metadata: dict | None = None, dynamic: bool = True) -> str:
    """Export ``model`` with edgetorch's to_edge/to_executorch; ``metadata`` becomes constant
    methods (default: ExecuTorch's llama set with max_seq_len / the model's context length)."""
    from torch.export import Dim

    from edgetorch.exir import to_edge

    if metadata is None:
        metadata = default_metadata(model, max_seq_len, dynamic)
    example = (torch.zeros(1, 2 if dynamic else 1, dtype=torch.long),
               torch.tensor([0], dtype=torch.long))
    shapes = ({1: Dim("token_dim", max=max_seq_len)}, None) if dynamic else None
    with torch.no_grad():
        ep = torch.export.export(model, example, dynamic_shapes=shapes, strict=True)
    et = to_edge(ep, constant_methods=metadata).to_executorch()
    with open(path, "wb") as f:
        et.write_to_file(f)
    return path


def default_metadata(model: TinyKVDecoder, max_seq_len: int, dynamic: bool = True) -> dict:
    return {"get_max_seq_len": max_seq_len, "get_max_context_len": model.max_ctx,
            "get_n_layers": len(model.qkv), "get_vocab_size": model.head.out_features,
            "use_kv_cache": True, "use_sdpa_with_kv_cache": False,
            "enable_dynamic_shape": dynamic, "get_bos_id": 0, "get_eos_ids": [1]}


def eager_greedy(model: TinyKVDecoder, prompt: list[int], n: int, chunk: int) -> list[int]:
    """Greedy decoding in eager torch with the same chunked prefill (the reference)."""
    for name, buf in model.named_buffers():
        if "cache" in name:
            buf.zero_()
    pos, out = 0, []
    with torch.no_grad():
        for i in range(0, len(prompt), chunk):
            piece = prompt[i:i + chunk]
            logits = model(torch.tensor([piece]), torch.tensor([pos]))
            pos += len(piece)
        for _ in range(n):
            tok = int(logits.argmax(-1))
            out.append(tok)
            logits = model(torch.tensor([[tok]]), torch.tensor([pos]))
            pos += 1
    return out


def without_methods(src: str, dst: str, names: set[str]) -> str:
    """Copy a .pte without some of its (metadata) methods, e.g. an export lacking
    get_eos_ids: re-serialised from the parsed file, far cheaper than exporting again."""
    from edgetorch.schema._pte_writer import serialize_pte
    from edgetorch.schema.pte import PteFile

    with open(src, "rb") as f:
        args = PteFile.parse(f.read()).to_serialize_args()
    program = args["program"]
    program.execution_plan = [p for p in program.execution_plan if p.name not in names]
    with open(dst, "wb") as f:
        f.write(serialize_pte(**args))
    return dst


class TinyNoCacheDecoder(nn.Module):
    """``base``'s weights without a KV cache: ``forward(tokens [1, S])`` attends over the whole
    sequence each call (ExecuTorch's runner treats a one-input forward this way)."""

    def __init__(self, base: TinyKVDecoder) -> None:
        super().__init__()
        self.base = base

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, seq = self.base, tokens.shape[1]
        x = b.tok(tokens) + b.pos(torch.arange(seq)).unsqueeze(0)
        mask = b.mask[:seq, :seq]
        for qkv, out in zip(b.qkv, b.out):
            q, k, v = qkv(x).view(1, seq, 3, b.n_heads, b.head_dim).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + out(att.transpose(1, 2).reshape(1, seq, -1))
        return b.head(x[:, -1, :]) + b.transition[tokens[:, -1]]


def export_no_cache(path: str, model: TinyNoCacheDecoder, max_len: int = 32) -> str:
    from torch.export import Dim

    from edgetorch.exir import to_edge

    meta = {"get_max_seq_len": max_len, "get_max_context_len": max_len, "use_kv_cache": False,
            "enable_dynamic_shape": True, "get_eos_ids": [1]}
    with torch.no_grad():
        ep = torch.export.export(model, (torch.zeros(1, 2, dtype=torch.long),),
                                 dynamic_shapes=({1: Dim("token_dim", max=max_len)},))
    with open(path, "wb") as f:
        to_edge(ep, constant_methods=meta).to_executorch().write_to_file(f)
    return path
