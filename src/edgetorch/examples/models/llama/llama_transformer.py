"""A llama-family decoder for on-device generation, in ExecuTorch's module and weight names
(``tok_embeddings``, ``layers.N.attention.wq``, ``feed_forward.w1``, ``norm``, ``output``), so
Meta checkpoints load with ``load_state_dict``.

``forward(tokens [1, S], input_pos [1]) -> logits [1, vocab]`` of the last position. The KV
caches are buffers the method mutates, in one of two forms:

* plain: caches ``[B, Hkv, L, D]`` written with ``index_put_`` at ``input_pos + arange(S)``,
  attention as matmuls with a causal float mask row-sliced at ``input_pos`` (portable kernels);
* custom ops (``use_sdpa_with_kv_cache_op``): caches ``[B, L, Hkv, D]`` written in place by
  ``llama::update_cache`` and read by ``llama::custom_sdpa`` (native GQA), as ExecuTorch's
  ``SDPACustom`` + ``CustomKVCache`` do.

Rotary embeddings use Meta's interleaved layout (pairs ``(2i, 2i+1)``), which is how Meta
checkpoints and GGUF files store ``wq``/``wk``. With ``tie_word_embeddings`` the LM head is
``tok_embeddings.weight`` itself, computed as ``W @ h`` so no transposed copy of the weight is
ever made and a ``.pte`` stores it once.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .model_args import ModelArgs


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(args: ModelArgs) -> tuple[torch.Tensor, torch.Tensor]:
    half = args.head_dim // 2
    inv_freq = 1.0 / (args.rope_theta ** (torch.arange(0, half, dtype=torch.float64) / half))
    angles = torch.outer(torch.arange(args.max_context_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, S, H, D] with pairs (2i, 2i+1) rotated by the angle of position s, frequency i."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.n_kv_heads, args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        if args.use_kv_cache:
            ctx = args.max_context_len
            shape = ((1, ctx, args.n_kv_heads, self.head_dim) if args.use_sdpa_with_kv_cache_op
                     else (1, args.n_kv_heads, ctx, self.head_dim))
            self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
            self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x: torch.Tensor, pos: int | torch.SymInt, cos: torch.Tensor,
                sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = apply_rope(self.wq(x).view(b, s, self.n_heads, self.head_dim), cos, sin)
        k = apply_rope(self.wk(x).view(b, s, self.n_kv_heads, self.head_dim), cos, sin)
        v = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim)
        if self.args.use_kv_cache and self.args.use_sdpa_with_kv_cache_op:
            torch.ops.llama.update_cache(k, self.k_cache, pos)
            torch.ops.llama.update_cache(v, self.v_cache, pos)
            y = torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, pos, None, 0.0, True)
            return self.wo(y.reshape(b, s, -1))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.args.use_kv_cache:
            positions = torch.arange(s) + pos
            torch.ops.aten.index_put_(self.k_cache, [None, None, positions], k)
            torch.ops.aten.index_put_(self.v_cache, [None, None, positions], v)
            k, v = self.k_cache, self.v_cache
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (self.head_dim ** -0.5) + mask
        y = F.softmax(scores, dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.w1 = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.w2 = nn.Linear(args.hidden_dim, args.dim, bias=False)
        self.w3 = nn.Linear(args.dim, args.hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x, pos, cos, sin, mask):
        h = x + self.attention(self.attention_norm(x), pos, cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = (None if args.tie_word_embeddings
                       else nn.Linear(args.dim, args.vocab_size, bias=False))
        cos, sin = rope_tables(args)
        self.register_buffer("freqs_cos", cos, persistent=False)
        self.register_buffer("freqs_sin", sin, persistent=False)
        if not (args.use_kv_cache and args.use_sdpa_with_kv_cache_op):
            n = args.max_context_len
            causal = torch.full((n, n), float("-inf")).triu(1)
            self.register_buffer("mask", causal, persistent=False)

    def untie(self) -> None:
        """Give the LM head its own copy of the embedding (before quantizing one of them)."""
        if self.output is None:
            self.output = nn.Linear(self.args.dim, self.args.vocab_size, bias=False)
            self.output.weight = nn.Parameter(self.tok_embeddings.weight.detach().clone())

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor | None = None
                ) -> torch.Tensor:
        s = tokens.shape[1]
        if self.args.use_kv_cache:
            pos = input_pos[0].item()
            torch._check(pos >= 0)
            torch._check(pos + s <= self.args.max_context_len)
        else:
            pos = 0
        cos = self.freqs_cos.narrow(0, pos, s)
        sin = self.freqs_sin.narrow(0, pos, s)
        mask = None
        if not (self.args.use_kv_cache and self.args.use_sdpa_with_kv_cache_op):
            mask = self.mask.narrow(0, pos, s)
            if not self.args.use_kv_cache:
                mask = mask[:, :s]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, pos, cos, sin, mask)
        h = self.norm(x[:, -1, :])
        if self.output is not None:
            return self.output(h)
        # Tied head: W [V, D] @ h^T reads the embedding table in place, no transposed copy.
        return (self.tok_embeddings.weight @ h.transpose(0, 1)).transpose(0, 1)
