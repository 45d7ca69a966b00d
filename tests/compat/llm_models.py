"""Tiny attention models over static KV caches that call ExecuTorch's ``llama::`` custom ops.

Shared by both sides of the LLM compatibility tests: imported in the reference venv after
``executorch.extension.llm.custom_ops.custom_ops`` and in ours after
``edgetorch.extension.llm.custom_ops.custom_ops`` (both define ``torch.ops.llama``). Plain
torch only, no edgetorch or executorch imports.
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB, DIM, HEADS, KV_HEADS, HEAD_DIM, CONTEXT, MAX_SEQ = 64, 32, 4, 2, 8, 16, 8
VARIANTS = ("update_cache+custom_sdpa", "sdpa_with_kv_cache", "custom_sdpa_mask")


class CacheAttention(nn.Module):
    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant
        self.embed = nn.Embedding(VOCAB, DIM)
        self.wq = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wo = nn.Linear(HEADS * HEAD_DIM, VOCAB, bias=False)
        shape = (1, CONTEXT, KV_HEADS, HEAD_DIM)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("mask", torch.full((CONTEXT, CONTEXT), float("-inf")).triu(1),
                             persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        pos = input_pos[0].item()
        torch._check(pos >= 0)
        s = tokens.shape[1]
        torch._check(pos + s <= CONTEXT)
        x = self.embed(tokens)
        q = self.wq(x).view(1, s, HEADS, HEAD_DIM)
        k = self.wk(x).view(1, s, KV_HEADS, HEAD_DIM)
        v = self.wv(x).view(1, s, KV_HEADS, HEAD_DIM)
        ops = torch.ops.llama
        if self.variant == "sdpa_with_kv_cache":
            y = ops.sdpa_with_kv_cache(q, k, v, self.k_cache, self.v_cache, pos, s, None, 0.0,
                                       True)
        else:
            ops.update_cache(k, self.k_cache, pos)
            ops.update_cache(v, self.v_cache, pos)
            if self.variant == "custom_sdpa_mask":
                y = ops.custom_sdpa(q, self.k_cache, self.v_cache, pos,
                                    self.mask.narrow(0, pos, s), 0.0, False)
            else:
                y = ops.custom_sdpa(q, self.k_cache, self.v_cache, pos, None, 0.0, True)
        return self.wo(y.reshape(1, s, -1))[:, -1]


class IndexCopyDecoder(nn.Module):
    """A llama-style decoder in plain torch ops: per layer, k/v caches are registered buffers
    written in place by ``index_copy_`` at the tokens' positions, and SDPA attends over the
    whole cache under a causal mask gathered by position."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.wqkv = nn.ModuleList(nn.Linear(DIM, 3 * DIM, bias=False) for _ in range(layers))
        self.wo = nn.ModuleList(nn.Linear(DIM, DIM, bias=False) for _ in range(layers))
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        shape = (1, HEADS, CONTEXT, DIM // HEADS)
        for i in range(layers):
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape), persistent=False)
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape), persistent=False)
        self.register_buffer("mask", torch.ones(CONTEXT, CONTEXT, dtype=torch.bool).tril(),
                             persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        positions = torch.arange(s) + input_pos
        x = self.embed(tokens)
        mask = self.mask.index_select(0, positions)
        for i, (wqkv, wo) in enumerate(zip(self.wqkv, self.wo)):
            q, k, v = wqkv(x).view(1, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
            k_cache, v_cache = getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}")
            k_cache.index_copy_(2, positions, k)
            v_cache.index_copy_(2, positions, v)
            y = nn.functional.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
            x = x + wo(y.transpose(1, 2).reshape(1, s, DIM))
        return self.head(x)[:, -1]


# ExecuTorch's llama metadata, as constant methods.
METADATA = {"get_max_seq_len": MAX_SEQ, "get_max_context_len": CONTEXT, "get_vocab_size": VOCAB,
            "get_n_layers": 2, "use_kv_cache": True, "use_sdpa_with_kv_cache": False,
            "enable_dynamic_shape": True, "get_bos_id": 0, "get_eos_ids": [1]}


def build(variant: str) -> nn.Module:
    torch.manual_seed(11)
    if variant == "index_copy+sdpa":
        return IndexCopyDecoder().eval()
    return CacheAttention(variant).eval()


def steps() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A prefill of 5 tokens, then 3 single-token decode steps."""
    g = torch.Generator().manual_seed(5)
    out = [(torch.randint(0, VOCAB, (1, 5), generator=g), torch.tensor([0]))]
    for p in range(5, 8):
        out.append((torch.randint(0, VOCAB, (1, 1), generator=g), torch.tensor([p])))
    return out


def export(model: nn.Module) -> torch.export.ExportedProgram:
    example = (torch.tensor([[1, 2, 3]]), torch.tensor([0]))
    dims = ({1: torch.export.Dim("token_dim", max=MAX_SEQ - 1)}, None)
    with torch.no_grad():
        return torch.export.export(model, example, dynamic_shapes=dims, strict=True)
