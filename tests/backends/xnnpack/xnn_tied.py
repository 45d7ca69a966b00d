"""A weight shared by a delegated user (a Linear, lowered to XNNPACK) and an undelegated one
(an Embedding's gather, portable), as in a decoder with tied embeddings. Lowered by ExecuTorch
(run inside the reference venv) or by edgetorch:

    python xnn_tied.py executorch|edgetorch OUT.pte
"""

from __future__ import annotations

import sys

import torch


class TiedEmbedding(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(97, 48)
        self.out = torch.nn.Linear(48, 97, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, tokens):
        return self.out(torch.relu(self.emb(tokens)))


def build() -> tuple[TiedEmbedding, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return TiedEmbedding().eval(), (torch.tensor([[1, 5, 7]]),)


def lower(package: str) -> bytes:
    if package == "executorch":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower
    else:
        from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from edgetorch.exir import to_edge_transform_and_lower
    model, inputs = build()
    ep = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


if __name__ == "__main__":
    with open(sys.argv[2], "wb") as f:
        f.write(lower(sys.argv[1]))
