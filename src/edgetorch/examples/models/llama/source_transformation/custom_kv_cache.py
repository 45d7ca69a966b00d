"""``CustomKVCache``: a KV cache written in place by ``llama::update_cache``, at ExecuTorch's
import path (``examples.models.llama.source_transformation.custom_kv_cache``) and with its
constructor and ``update`` signature.

The caches are ``[B, S, H, D]`` buffers (the custom op's sequence dimension is 1);
``update`` takes ``k_val``/``v_val`` as ``[B, H, S, D]`` and returns the whole caches in that
layout. Exported, each update is one ``llama::update_cache`` that mutates its buffer, which
``to_executorch`` keeps as an in-place kernel call (see ``extension/llm/custom_ops``).
"""

from __future__ import annotations

import torch
from torch import nn

from edgetorch.errors import FeatureNotAvailableError
from edgetorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (registers llama::*)


class CustomKVCache(nn.Module):
    def __init__(self, max_batch_size: int, max_context_length: int, n_heads: int,
                 head_dim: int, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.max_context_length = max_context_length
        self.n_heads = n_heads
        self.head_dim = head_dim
        shape = (max_batch_size, max_context_length, n_heads, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device="cpu"))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device="cpu"))

    def update(self, input_pos: torch.Tensor, k_val: torch.Tensor, v_val: torch.Tensor,
               indices: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if indices is not None:
            raise FeatureNotAvailableError(
                "CustomKVCache.update(indices=...) needs llama::update_cache_with_indices, "
                "which edgetorch does not provide; call update without indices")
        start_pos = input_pos[0].item()
        torch.ops.llama.update_cache(k_val.transpose(1, 2), self.k_cache, start_pos)
        torch.ops.llama.update_cache(v_val.transpose(1, 2), self.v_cache, start_pos)
        return self.k_cache.transpose(1, 2), self.v_cache.transpose(1, 2)
