"""intermediate_output_tap: reducers (the emitted Edge subgraph computes what ``eager`` does,
and both what torch's own reductions give) and node selectors on an exported graph."""

from __future__ import annotations

import pytest
import torch

from edgetorch.devtools.intermediate_output_tap import (
    FULL_TENSOR,
    STATS,
    get_reducer,
    select_all,
    select_all_call_function,
    select_any,
    select_by_module_class,
    select_by_module_path,
    select_by_op_type,
    select_not,
)


def _emitted(reducer, t: torch.Tensor) -> torch.Tensor:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = t
    graph.output(reducer.emit(graph, x))
    return torch.fx.GraphModule(torch.nn.Module(), graph)(t)


@pytest.mark.parametrize("t", [torch.randn(3, 5, 7), torch.arange(-6, 6, dtype=torch.int32),
                               torch.tensor([1.0, float("nan"), 0.0, float("inf"), -2.0])])
def test_stats_emit_matches_eager_and_torch(t):
    eager = STATS.eager(t)
    torch.testing.assert_close(_emitted(STATS, t), eager, equal_nan=True)
    f = t.to(torch.float32)
    finite = f[torch.isfinite(f)]
    got = dict(zip(STATS.fields, eager.tolist(), strict=True))
    assert got["nan_count"] == torch.isnan(f).sum().item()
    assert got["inf_count"] == torch.isinf(f).sum().item()
    assert got["zero_count"] == (f == 0).sum().item()
    if finite.numel() == f.numel():  # float32: one rounding per reduction step
        torch.testing.assert_close(torch.tensor(got["std"]), f.std(unbiased=False),
                                   rtol=1e-4, atol=1e-5)
        k = max(1, -(-f.numel() // 100))
        assert got["p99_abs"] == f.abs().flatten().sort(descending=True).values[k - 1].item()


def test_full_tensor_and_lookup():
    t = torch.randn(2, 3)
    assert _emitted(FULL_TENSOR, t) is t or torch.equal(_emitted(FULL_TENSOR, t), t)
    assert get_reducer("STATS") is STATS and get_reducer(FULL_TENSOR) is FULL_TENSOR
    with pytest.raises(ValueError, match="Unknown reducer"):
        get_reducer("median")


class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.softmax(self.q(x), dim=-1)


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([_Attention(), _Attention()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) + x
        return x


def test_selectors_on_exported_graph():
    ep = torch.export.export(_Net(), (torch.randn(2, 4),))
    nodes = list(ep.graph.nodes)

    def names(selector):
        return [n.name for n in nodes if selector(n)]

    calls = names(select_all_call_function())
    assert calls and all(n.startswith(("linear", "softmax", "add")) for n in calls)
    assert names(select_by_op_type("aten._softmax.default", "softmax.int")) == \
        [n for n in calls if n.startswith("softmax")]
    # a module's terminal node is the one whose users lie outside it: the softmax
    assert names(select_by_module_path("layers.*")) == \
        [n for n in calls if n.startswith("softmax")]
    assert names(select_by_module_class("_Attention", output_only=False)) == \
        [n for n in calls if not n.startswith("add")]
    assert names(select_by_module_path("layers.1")) == \
        [n for n in calls if n.startswith("softmax")][1:]
    linear = select_by_op_type("linear.default")
    assert names(select_all(select_all_call_function(), select_not(linear))) == \
        [n for n in calls if not n.startswith("linear")]
    assert names(select_any()) == [] and len(names(select_all())) == len(nodes)
    with pytest.raises(ValueError):
        select_by_op_type()
