"""The decoder's hyperparameters: Meta's ``params.json`` keys plus ExecuTorch's export options."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass
class ModelArgs:
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None
    vocab_size: int = 256
    hidden_dim: int | None = None
    multiple_of: int = 256
    ffn_dim_multiplier: float | None = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    max_seq_len: int = 128  # tokens per forward call
    max_context_len: int = 128  # KV-cache positions
    use_kv_cache: bool = True
    use_sdpa_with_kv_cache_op: bool = False  # llama::update_cache + llama::custom_sdpa
    enable_dynamic_shape: bool = True

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(f"dim {self.dim}, n_heads {self.n_heads} and n_kv_heads "
                             f"{self.n_kv_heads} must divide evenly")
        if self.hidden_dim is None:  # Meta's llama rule for the SwiGLU width
            hidden = int(2 * 4 * self.dim / 3)
            if self.ffn_dim_multiplier is not None:
                hidden = int(self.ffn_dim_multiplier * hidden)
            self.hidden_dim = self.multiple_of * -(-hidden // self.multiple_of)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @classmethod
    def from_params(cls, params: dict[str, Any], **overrides: Any) -> ModelArgs:
        """From a Meta ``params.json`` dict; unknown keys (``use_hf_rope`` ...) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in params.items() if k in names}, **overrides})
