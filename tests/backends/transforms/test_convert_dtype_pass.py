"""``I64toI32``: int64 computed as int32 inside the graph, inputs and outputs keep int64."""

from __future__ import annotations

import torch

from edgetorch.backends.transforms.convert_dtype_pass import I64toI32
from edgetorch.exir import EdgeCompileConfig, to_edge


class _IndexMath(torch.nn.Module):
    def forward(self, x, i, j):
        return i + j, x.sum(dim=1)


def _copies(gm, dtype):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and "_to_dim_order_copy" in str(n.target) and n.kwargs.get("dtype") == dtype]


def test_int64_runs_as_int32_between_copies():
    args = (torch.rand(3, 5), torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6]))
    edge = to_edge(torch.export.export(_IndexMath(), args),
                   compile_config=EdgeCompileConfig(_skip_dim_order=False))
    edge = edge.transform([I64toI32(False)])
    gm = edge.exported_program().graph_module
    # each int64 input is copied to int32, the int64 output copied back once
    assert len(_copies(gm, torch.int32)) == 2 and len(_copies(gm, torch.int64)) == 1
    inner = [n for n in gm.graph.nodes if n.op == "call_function"
             and "_to_dim_order_copy" not in str(n.target)]
    assert all(n.meta["val"].dtype != torch.int64 for n in inner)
    out = edge.exported_program().module()(*args)
    ref = _IndexMath()(*args)
    assert out[0].dtype == torch.int64
    torch.testing.assert_close(out[0], ref[0], rtol=0, atol=0)
    torch.testing.assert_close(out[1], ref[1], rtol=0, atol=0)
