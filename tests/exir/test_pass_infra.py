"""User passes as ExecuTorch's documentation writes them (tests/support/doc_passes.py) run
on our Edge programs; each resulting .pte runs in our runtime and equals eager PyTorch on the
rewritten model. Also PassManager checks, pass errors and the ``rewrite`` helper."""

from __future__ import annotations

import pytest
import torch
from doc_passes import (  # tests/support
    CloneThenAdd,
    LinearPlusInput,
    RemoveClonePass,
    ReplaceAddPass,
    ReplaceAddWithMul,
    ReplaceAddWithMulSub,
    ReplaceDivPass,
)

from edgetorch.errors import PassError, UnsupportedOperatorError
from edgetorch.exir import to_edge
from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.exir.pass_base import ExportPass, NodeMetadata, PassResult, ProxyValue
from edgetorch.exir.pass_manager import PassManager
from edgetorch.exir.passes import rewrite
from edgetorch.runtime import Runtime


def _edge(model, *inputs):
    return to_edge(torch.export.export(model, inputs))


def _run(manager, *inputs):
    et = manager.to_executorch()
    return Runtime.get().load_program(et.buffer).load_method("forward").execute(list(inputs))


def _calls(manager):
    gm = manager.exported_program().graph_module
    return [n for n in gm.graph.nodes if n.op == "call_function"]


# ---- tests --------------------------------------------------------------------------------


def test_one_to_many_pass_keeps_weights_and_provenance():
    torch.manual_seed(0)
    model, x = LinearPlusInput().eval(), torch.randn(3, 4)
    edge = _edge(model, x).transform([ReplaceAddWithMulSub()])
    calls = _calls(edge)
    assert [n.target for n in calls][-2:] == [exir_ops.edge.aten.mul.Tensor,
                                             exir_ops.edge.aten.sub.Tensor]
    # Both new nodes carry the replaced node's source line.
    for node in calls[-2:]:
        assert "return self.lin(x) + x" in node.meta["stack_trace"]
        assert node.meta["val"].shape == (3, 4)
    (out,) = _run(edge, x)
    with torch.no_grad():
        expected = model.lin(x) * x - x
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_one_to_one_and_one_to_none_passes():
    x, y = torch.randn(2, 5), torch.randn(2, 5)
    edge = _edge(CloneThenAdd(), x, y)
    assert any(n.target == exir_ops.edge.dim_order_ops._clone_dim_order.default
               for n in _calls(edge))
    edge = edge.transform([RemoveClonePass(), ReplaceAddWithMul()])
    assert [n.target for n in _calls(edge)] == [exir_ops.edge.aten.sigmoid.default,
                                                exir_ops.edge.aten.mul.Tensor]
    (out,) = _run(edge, x, y)
    torch.testing.assert_close(out, torch.sigmoid(x) * y, rtol=1e-5, atol=1e-5)


def test_pass_base_with_requires_and_ensures():
    x, y = torch.randn(4), torch.rand(4) + 0.5
    edge = _edge(CloneThenAdd(), x, y).transform(
        [ReplaceAddPass(exir_ops.edge.aten.div.Tensor)])
    (out,) = _run(edge, x, y)
    torch.testing.assert_close(out, torch.sigmoid(x) / y, rtol=1e-5, atol=1e-5)
    # requires() refuses a graph without add, and the error names the pass.
    with pytest.raises(PassError, match="ReplaceAddPass failed: ValueError: No torch.add ops!"):
        edge.transform([ReplaceAddPass(exir_ops.edge.aten.div.Tensor)])


def test_pass_manager_checks_after_each_pass():
    x, y = torch.randn(4), torch.rand(4) + 0.5
    replace_add_with_div = ReplaceAddPass(exir_ops.edge.aten.div.Tensor)
    replace_div_with_mul = ReplaceDivPass(exir_ops.edge.aten.mul.Tensor)

    def check_add_or_div(graph_module):
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and node.target not in (
                    exir_ops.edge.aten.sigmoid.default, exir_ops.edge.aten.add.Tensor,
                    exir_ops.edge.aten.div.Tensor, exir_ops.edge.dim_order_ops._clone_dim_order.default):
                raise ValueError("Target should be div!")

    pm = PassManager(passes=[replace_add_with_div, replace_div_with_mul],
                     run_checks_after_each_pass=True, suppress_check_failures=False)
    pm.add_checks(check_add_or_div)
    gm = _edge(CloneThenAdd(), x, y).exported_program().graph_module
    with pytest.raises(Exception, match="'ReplaceDivPass' pass after the following passes: "
                                        r"\['ReplaceAddPass'\]") as info:
        pm(gm)
    assert isinstance(info.value.__cause__, ValueError)

    # Suppressed checks only log; a PassManager is itself a pass for transform().
    pm = PassManager(passes=[ReplaceAddPass(exir_ops.edge.aten.div.Tensor),
                             ReplaceDivPass(exir_ops.edge.aten.mul.Tensor)],
                     run_checks_after_each_pass=True, suppress_check_failures=True)
    pm.add_checks(check_add_or_div)
    edge = _edge(CloneThenAdd(), x, y).transform(pm)
    assert exir_ops.edge.aten.mul.Tensor in [n.target for n in _calls(edge)]
    (out,) = _run(edge, x, y)
    torch.testing.assert_close(out, torch.sigmoid(x) * y, rtol=1e-5, atol=1e-5)


def test_call_operator_sees_proxy_values_and_metadata():
    seen = []

    class Spy(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            seen.append((op, type(args[0]), type(meta)))
            return super().call_operator(op, args, kwargs, meta)

    x, y = torch.randn(2), torch.randn(2)
    gm = _edge(CloneThenAdd(), x, y).exported_program().graph_module
    result = Spy()(gm)
    assert isinstance(result, PassResult) and result.modified
    assert seen[0] == (exir_ops.edge.aten.sigmoid.default, ProxyValue, NodeMetadata)


def test_transform_reverifies_and_names_the_failing_pass():
    class Boom(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            raise KeyError("boom")

    x, y = torch.randn(2), torch.randn(2)
    with pytest.raises(PassError, match=r"(?s)pass Boom failed: .*boom.*%sigmoid.*"
                                        "passes that ran before it: ReplaceAddWithMul"):
        _edge(CloneThenAdd(), x, y).transform([ReplaceAddWithMul(), Boom()])

    class ToUnsupported(ExportPass):  # inserts an operator the runtime has no kernel for
        def call_operator(self, op, args, kwargs, meta):
            if op != exir_ops.edge.aten.sigmoid.default:
                return super().call_operator(op, args, kwargs, meta)
            return super().call_operator(torch.ops.aten.special_i1.default, args, kwargs, meta)

    with pytest.raises(UnsupportedOperatorError, match="special_i1"):
        _edge(CloneThenAdd(), x, y).transform([ToUnsupported()])


def test_rewrite_rule_table():
    x, y = torch.randn(3), torch.randn(3)
    edge = _edge(CloneThenAdd(), x, y)

    def to_sub(node):
        node.target = exir_ops.edge.aten.sub.Tensor
        return True

    def add_to_sub(gm):
        return PassResult(gm, rewrite(gm, {torch.ops.aten.add.Tensor: to_sub}))

    edge = edge.transform([add_to_sub])
    (out,) = _run(edge, x, y)
    torch.testing.assert_close(out, torch.sigmoid(x) - y, rtol=1e-5, atol=1e-5)


class CondAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch.cond(x.sum() > 0, lambda a, b: a + b, lambda a, b: a - b, (x, y))


def test_export_pass_rewrites_inside_cond_branches():
    x, y = torch.rand(3) + 0.1, torch.randn(3)
    edge = _edge(CondAdd(), x, y).transform([ReplaceAddWithMul()])
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    torch.testing.assert_close(method.execute([x, y])[0], x * y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(method.execute([-x, y])[0], -x - y, rtol=1e-5, atol=1e-5)


class LinearCumsumAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cumsum(self.lin(x), 0).sigmoid() + x


def test_export_pass_keeps_delegates():
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    torch.manual_seed(0)
    model, x = LinearCumsumAdd().eval(), torch.randn(2, 4)
    edge = _edge(model, x).to_backend(XnnpackPartitioner())
    before = [n.target for n in edge.exported_program().graph.nodes if n.op == "get_attr"]
    edge = edge.transform([ReplaceAddWithMul()])  # the add is inside a delegate: untouched
    after = [n.target for n in edge.exported_program().graph.nodes if n.op == "get_attr"]
    assert before == after == ["lowered_module_0", "lowered_module_1"]
    (out,) = _run(edge, x)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)


def test_export_pass_replays_a_memory_format_copy_and_legalize_adds_contiguous_copies():
    """A graph with ``x.to(memory_format=...)`` re-traces (its Meta kernel keeps fake tensors
    off the CPU), and ``LegalizePortableDimOrderPass`` puts a contiguous copy before a mean
    of a channels-last tensor (ExecuTorch's portable mean refuses one)."""
    from edgetorch.exir.passes import LegalizePortableDimOrderPass
    from edgetorch.exir.passes.legalize_portable_dim_order_pass import needs_legalization

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.mean(x.to(memory_format=torch.channels_last), dim=[2, 3])

    x = torch.randn(1, 2, 3, 4)
    edge = to_edge(torch.export.export(M(), (x,)))
    assert needs_legalization(edge.exported_program().graph_module)
    replayed = edge.transform([ExportPass()]).exported_program()
    assert "dim_order: [0, 2, 3, 1]" in str(replayed.graph)
    legal = edge.transform([LegalizePortableDimOrderPass()]).exported_program()
    mean = next(n for n in legal.graph.nodes if "mean" in str(n.target))
    assert mean.args[0].kwargs["dim_order"] == [0, 1, 2, 3]
    assert not needs_legalization(legal.graph_module)
    torch.testing.assert_close(legal.module()(x), M()(x))
