"""A single Transformer encoder layer (self-attention + feed-forward, post-norm)."""

from __future__ import annotations

import torch
from torch import nn

from ._init import randomize_layernorm


class TransformerEncoder(nn.Module):
    """Wraps one ``nn.TransformerEncoderLayer`` (d_model 64, 4 heads, FFN 128, batch-first)."""

    def __init__(self, d_model: int = 64, nhead: int = 4, dim_feedforward: int = 128) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model=d_model,
            nhead=nhead,
            dim_feedforward=dim_feedforward,
            dropout=0.0,
            batch_first=True,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def transformer_encoder() -> TransformerEncoder:
    """Build the seeded encoder layer in eval mode, LayerNorm affine parameters randomised."""
    torch.manual_seed(0)
    model = TransformerEncoder()
    randomize_layernorm(model)
    return model.eval()
