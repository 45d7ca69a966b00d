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


class _TwoLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 8)
        self.l2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def _tapped(model, x):
    from edgetorch.devtools.intermediate_output_tap import tap_intermediate_outputs_

    ep = torch.export.export(model, (x,))
    rules = [(select_by_op_type("aten.linear.default"), FULL_TENSOR),
             (select_all_call_function(), STATS)]
    return tap_intermediate_outputs_(ep, rules)


def test_tap_pass_appends_one_user_output_per_selected_node():
    model, x = _TwoLinears().eval(), torch.randn(2, 8)
    ep, specs = _tapped(model, x)
    assert [(s.node_name, s.reducer_name, s.output_index) for s in specs] == [
        ("linear", "FULL_TENSOR", 1), ("relu", "STATS", 2), ("linear_1", "FULL_TENSOR", 3)]
    assert specs[0].module_class == specs[2].module_class == "Linear"
    assert specs[0].module_path == "l1" and specs[2].module_path == "l2"
    assert len(ep.graph_signature.output_specs) == 4
    outputs = ep.module()(x)
    torch.testing.assert_close(outputs[0], model(x))
    torch.testing.assert_close(outputs[1], model.l1(x))  # the tap's eager value
    torch.testing.assert_close(outputs[2], STATS.eager(torch.relu(model.l1(x))))


def test_taps_survive_xnnpack_lowering_and_strip_into_a_program_edgetorch_runs():
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from edgetorch.devtools.intermediate_output_tap import find_tap_nodes, strip_taps_
    from edgetorch.errors import UnsupportedOperatorError
    from edgetorch.exir import to_edge_transform_and_lower
    from edgetorch.runtime import Runtime

    model, x = _TwoLinears().eval(), torch.randn(2, 8)
    ep, specs = _tapped(model, x)
    aot = ep.module()(x)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    assert len(find_tap_nodes(edge.exported_program().graph_module)) == 3  # not delegated
    with pytest.raises(UnsupportedOperatorError, match="executorch_devtools::tap"):
        edge.to_executorch()  # a tap left in has no kernel: strip first
    strip_taps_(edge)
    assert not find_tap_nodes(edge.exported_program().graph_module)
    outputs = Runtime.get().load_program(edge.to_executorch().buffer).load_method(
        "forward").execute([x])
    assert len(outputs) == 4
    for spec in specs:  # XNNPACK's float32 linear against torch's: the project's bound
        torch.testing.assert_close(outputs[spec.output_index], aot[spec.output_index].detach(),
                                   rtol=1e-5, atol=1e-5)


def test_no_matching_rule_is_an_error_or_a_warning():
    from edgetorch.devtools.intermediate_output_tap import tap_intermediate_outputs_

    ep = torch.export.export(_TwoLinears(), (torch.randn(2, 8),))
    rule = (select_by_op_type("aten.conv2d.default"), STATS)
    with pytest.raises(ValueError, match="no rule matched"):
        tap_intermediate_outputs_(ep, rule)
    with pytest.warns(UserWarning, match="no rule matched"):
        assert tap_intermediate_outputs_(ep, rule, error_on_empty=False) == (ep, [])


def test_tap_compare_runs_the_whole_pipeline_and_compares_per_tap():
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from edgetorch.devtools.intermediate_output_tap import tap_compare

    model, x = _TwoLinears().eval(), torch.randn(2, 8)
    rules = [(select_by_op_type("aten.linear.default"), FULL_TENSOR),
             (select_all_call_function(), STATS)]
    df, specs = tap_compare(model, (x,), [XnnpackPartitioner()], rules=rules)
    assert list(df["node_name"]) == [s.node_name for s in specs] == ["linear", "relu", "linear_1"]
    full = df[df["reducer_name"] == "FULL_TENSOR"]
    assert (full["aot_numel"] == full["rt_numel"]).all() and set(full["aot_numel"]) == {16, 8}
    assert (full["sqnr_db"] > 100).all()  # float32 XNNPACK against torch: ~1e-7 relative error
    stats = df[df["reducer_name"] == "STATS"].iloc[0]
    for field in STATS.fields:
        assert stats[f"rt_{field}"] == pytest.approx(stats[f"aot_{field}"], rel=1e-5, abs=1e-5)
