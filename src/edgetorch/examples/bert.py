"""A small BERT-style encoder: embeddings and two post-norm encoder layers with a padding mask."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ._init import randomize_layernorm


class SelfAttention(nn.Module):
    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.n_heads, self.head_dim).permute(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + mask_bias
        ctx = F.softmax(scores, dim=-1) @ v
        return self.out(ctx.permute(0, 2, 1, 3).reshape(b, t, d))


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.attention = SelfAttention(dim, n_heads)
        self.attn_norm = nn.LayerNorm(dim, eps=1e-12)
        self.ffn_in, self.ffn_out = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.ffn_norm = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        x = self.attn_norm(x + self.attention(x, mask_bias))
        return self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class BertEncoder(nn.Module):
    """(input_ids, attention_mask), both (batch, seq) int64 -> (hidden states, pooled)."""

    def __init__(self, vocab: int = 256, dim: int = 64, n_layers: int = 2, n_heads: int = 4,
                 hidden: int = 128, max_seq: int = 16) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_seq, dim)
        self.token_type = nn.Embedding(2, dim)
        self.embed_norm = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(dim, n_heads, hidden) for _ in range(n_layers))
        self.pooler = nn.Linear(dim, dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        t = input_ids.shape[1]
        positions = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type.weight[0]
        x = self.embed_norm(x)
        # padded keys get a large negative bias (finite: -1e4 fits float16)
        keep = attention_mask[:, None, None, :].to(x.dtype)
        mask_bias = (1.0 - keep) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


def bert_encoder() -> BertEncoder:
    """Build the seeded encoder in eval mode, LayerNorm affine parameters randomised."""
    torch.manual_seed(0)
    model = BertEncoder()
    randomize_layernorm(model)
    return model.eval()


def bert_inputs(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Two sequences of 16 token ids; the second padded after 11 tokens."""
    ids = torch.randint(0, 256, (2, 16), generator=gen)
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 11:] = 0
    return ids, mask
