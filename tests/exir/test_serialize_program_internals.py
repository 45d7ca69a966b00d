"""``exir._serialize._program`` (ExecuTorch's serializer internals): a .pte parsed into a
``PTEFile`` holds its constants and delegate blobs inline, and writing it back gives the same
bytes."""

from __future__ import annotations

import pytest
import torch

from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from edgetorch.exir import to_edge, to_edge_transform_and_lower
from edgetorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary


def _programs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    ep = torch.export.export(model, (torch.randn(2, 4),))
    return {"portable": (to_edge(ep).to_executorch(), model),
            "xnnpack": (to_edge_transform_and_lower(
                ep, partitioner=[XnnpackPartitioner()]).to_executorch(), model)}


@pytest.mark.parametrize("kind", ["portable", "xnnpack"])
def test_deserialize_then_serialize_gives_the_same_bytes(kind):
    et, model = _programs()[kind]
    pte = deserialize_pte_binary(et.buffer)
    assert pte.program.segments == []
    if kind == "portable":  # bias and the folded transposed weight, after the empty buffer 0
        stored = [bytes(b.storage) for b in pte.program.constant_buffer]
        assert stored == [b"", model[0].bias.detach().numpy().tobytes(),
                          model[0].weight.detach().t().contiguous().numpy().tobytes()]
        assert pte.named_data is None
    else:  # the blob is inline again; the weights are named data
        assert len(pte.program.backend_delegate_data) == 1
        assert len(pte.named_data.pte_data) == 2
    assert serialize_pte_binary(pte, extract_delegate_segments=True) == et.buffer
