"""Everything the load passes build is built by ``load_method``: a fresh method's first
``execute`` runs what later ones run and builds nothing (a method's steps, XNNPACK's plan for
its declared input shapes, the folded weights, the planned memory's pages, a convolution's
transformed filters and work buffers). How long the first call takes against a later one is a
benchmark figure (bench/bench_first_call.py), not a test."""

from __future__ import annotations

import collections
import gc
import sys

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


def _pte(model: torch.nn.Module, x: torch.Tensor, xnnpack: bool) -> bytes:
    from edgetorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    ep = torch.export.export(model, (x,))
    if xnnpack:
        from edgetorch.backends.xnnpack import XnnpackPartitioner

        program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        return program.to_executorch().buffer
    # BatchNorm left in the program: folded by the load pass, as in a foreign .pte
    return to_edge(ep).to_executorch(ExecutorchBackendConfig(fuse_batch_norm=False)).buffer


def _program(xnnpack: bool):
    torch.manual_seed(0)
    model, x = _Net().eval(), torch.randn(1, 4, 6, 6)
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        want = model(x).numpy()
    return Runtime.get().load_program(_pte(model, x, xnnpack)), [x.numpy()], want


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


class _Wide(torch.nn.Module):
    """Convolutions the dispatcher runs by Winograd (3x3, 16 channels) and by im2col (5x5),
    heads whose products a plan fuses, a layer norm and a softmax."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.conv5 = torch.nn.Conv2d(16, 8, 5, padding=2)
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        y = self.conv5(torch.relu(self.conv(x))).flatten(2).transpose(1, 2)  # (1, 64, 8)
        return self.norm(self.attn(y, y, y, need_weights=False)[0]).softmax(-1)


def _python_calls(method, inputs) -> collections.Counter:
    """How often each Python function and builtin runs in one call."""
    counts: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        elif event == "c_call":
            counts[(getattr(arg, "__module__", None), getattr(arg, "__qualname__", None))] += 1

    gc.disable()  # (a collection would run finalizers inside the call)
    sys.setprofile(profile)
    try:
        method.execute(inputs)
    finally:
        sys.setprofile(None)
        gc.enable()
    return counts


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("xnnpack", [False, True], ids=["portable", "xnnpack"])
def test_the_first_call_runs_the_very_functions_of_later_calls(xnnpack, compiled):
    """Nothing is done once at the first call (a filter transformed, a buffer allocated, a
    view made, an import): it runs the same Python functions, as often, as later calls."""
    from edgetorch.kernels import accel

    if compiled:
        pytest.importorskip("numba")
    torch.manual_seed(0)
    model, x = _Wide().eval(), torch.randn(1, 16, 8, 8)
    pte = _pte(model, x, xnnpack)
    with torch.no_grad():
        want = model(x).numpy()
    with accel.enabled() if compiled else accel.disabled():
        if compiled:
            # numba compiles a kernel it never compiled on this machine (an empty or stale
            # cache) at its first call, by design: the same program on another input size
            # compiles the same signatures first, without making any of this one's buffers
            other = torch.randn(1, 16, 6, 6)
            Runtime.get().load_program(_pte(model, other, xnnpack)).load_method(
                "forward", optimize=True).execute([other.numpy()])
        method = Runtime.get().load_program(pte).load_method("forward", optimize=True)
        calls = [_python_calls(method, [x.numpy()]) for _ in range(3)]
        np.testing.assert_allclose(method.execute([x.numpy()])[0], want, rtol=1e-4, atol=1e-5)
    first, later = calls[0], calls[2]
    assert first == later, {k: (first[k], later[k]) for k in first.keys() | later.keys()
                            if first[k] != later[k]}
    assert calls[1] == later


@pytest.fixture
def _full_shared_scratch():
    """The convolutions' per-thread work buffers one short of full, as other methods leave it."""
    from edgetorch.kernels.conv import nchw

    saved = dict(nchw._SCRATCH.bufs), set(nchw._SCRATCH.prepared)
    nchw._SCRATCH.bufs.clear()
    nchw._SCRATCH.prepared.clear()
    for i in range(nchw._Scratch.MAX_BUFFERS - 1):
        nchw._SCRATCH.get(("another method", i), (1,), np.dtype(np.float32))
    yield
    nchw._SCRATCH.bufs.clear()
    nchw._SCRATCH.bufs.update(saved[0])
    nchw._SCRATCH.prepared.clear()
    nchw._SCRATCH.prepared.update(saved[1])


@pytest.mark.usefixtures("_full_shared_scratch")
def test_the_first_call_keeps_what_load_made_when_other_methods_filled_the_buffers():
    """A full shared buffer cache drops other methods' oldest buffers, not the ones this
    method's load just made (it once dropped them all, and the first call allocated again)."""
    test_the_first_call_runs_the_very_functions_of_later_calls(xnnpack=False, compiled=False)
