"""Everything the load passes build is built by ``load_method``: a fresh method's first
``execute`` runs what later ones run and builds nothing (a method's steps, XNNPACK's plan for
its declared input shapes, the folded weights, the planned memory's pages). How long the first
call takes against a later one is a benchmark figure (bench/bench_first_call.py), not a test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgetorch.backends.xnnpack.runtime import plan as planning
from edgetorch.runtime import Runtime, optimize
from edgetorch.runtime.optimize import steps


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.norm = torch.nn.LayerNorm(6)
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x):
        return self.fc(self.norm(torch.relu(self.bn(self.conv(x))))).softmax(-1)


def _program(xnnpack: bool):
    from edgetorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    torch.manual_seed(0)
    model, x = _Net().eval(), torch.randn(1, 4, 6, 6)
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        want = model(x).numpy()
    ep = torch.export.export(model, (x,))
    if xnnpack:
        from edgetorch.backends.xnnpack import XnnpackPartitioner

        program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        pte = program.to_executorch().buffer
    else:  # BatchNorm left in the program: folded by the load pass, as in a foreign .pte
        pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(fuse_batch_norm=False)).buffer
    return Runtime.get().load_program(pte), [x.numpy()], want


def _nothing_built_now(monkeypatch):
    """Make every builder of the load passes fail if anything calls it from now on."""
    def built(*args, **kwargs):
        raise AssertionError("built by execute, not by load_method")
    monkeypatch.setattr(optimize, "run_passes", built)
    monkeypatch.setattr(planning, "build", built)
    monkeypatch.setattr(steps.StepPlan, "build", built)


@pytest.mark.parametrize("xnnpack", [False, True], ids=["portable", "xnnpack"])
def test_the_first_execute_builds_nothing(monkeypatch, xnnpack):
    program, inputs, want = _program(xnnpack)
    method = program.load_method("forward", optimize=True)
    report = method.load_report
    assert method._steps is not None and report["touch_planned_memory"].status == "ran"
    handles = [h for _, h in method._delegate_handles]
    assert bool(handles) == xnnpack
    for h in handles:  # each delegate planned for its declared input shapes, at load
        assert len(h.plans) == 1 and h.plan is not None and not h.warming
    if xnnpack:
        assert report["xnnpack.plan"].status == "ran"
    else:
        assert report["fold_batch_norm"].changed == 3  # the convolution, BatchNorm, relu
    plans = [dict(h.plans) for h in handles]
    step_list = method._steps
    _nothing_built_now(monkeypatch)
    for _ in range(3):
        np.testing.assert_allclose(method.execute(inputs)[0], want, rtol=1e-4, atol=1e-5)
    assert method._steps is step_list and [h.plans for h in handles] == plans


def test_without_the_plan_pass_nothing_is_planned_at_load():
    program, inputs, want = _program(True)
    method = program.load_method("forward", optimize=set(optimize.PASSES.names())
                                 - {"xnnpack.plan"})
    assert all(not h.plans for _, h in method._delegate_handles)
    assert method.load_report["xnnpack.plan"].status == "off"
    np.testing.assert_allclose(method.execute(inputs)[0], want, rtol=1e-4, atol=1e-5)


def test_a_delegate_with_dynamic_sizes_is_planned_per_shape_at_calls():
    """Bounded dynamic sizes are upper bounds, which calls seldom reach: no plan at load for
    them (an LLM's longest prompt), a plan per shape at its second call, as before."""
    from edgetorch.backends.xnnpack import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model, x = torch.nn.Linear(6, 3).eval(), torch.randn(4, 6)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("n", max=8)},))
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]) \
        .to_executorch().buffer
    method = Runtime.get().load_program(pte).load_method("forward", optimize=True)
    handles = [h for _, h in method._delegate_handles]
    assert handles and all(not h.plans for h in handles)
    for _ in range(3):
        with torch.no_grad():
            np.testing.assert_allclose(method.execute([x.numpy()])[0], model(x).numpy(),
                                       rtol=1e-5, atol=1e-6)
    assert all(len(h.plans) == 1 for h in handles)
