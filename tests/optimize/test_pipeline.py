"""The load passes as one switchable, reported, strict pipeline (runtime/optimize): which
passes run, what the report says, and what happens when a pass fails."""

from __future__ import annotations

import pytest
import torch

from edgetorch.errors import InvalidArgumentError, OptimizationError
from edgetorch.exir import to_edge
from edgetorch.runtime import Runtime, optimize
from edgetorch.runtime.optimize import PASSES, Pass


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).softmax(-1)


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    x = torch.randn(3, 8)
    pte = to_edge(torch.export.export(_Net().eval(), (x,))).to_executorch().buffer
    return Runtime.get().load_program(pte), [x.numpy()]


def _status(method) -> dict[str, str]:
    return {r.name: r.status for r in method.load_report.results}


def test_every_pass_is_named_with_its_promise():
    names = PASSES.names()
    assert names[:8] == ["fold_batch_norm", "fuse_conv_activation", "fuse_safe_softmax",
                         "fold_constants", "prepare_kernels", "skip_unread_outputs",
                         "forward_copies", "drop_unread_copies"]
    assert {"xnnpack.plan", "xnnpack.fuse_chains", "xnnpack.arena",
            "xnnpack.fold_clamps"} <= set(names)
    assert len(set(names)) == len(names)
    text = str(PASSES)
    for p in PASSES:
        assert p.doc and p.name in text
        assert p.exact or p.tolerance.why
    assert PASSES.get("prepare_kernels").exact and not PASSES.get("fold_batch_norm").exact
    assert not PASSES.get("fuse_conv_activation").exact


def test_optimize_false_runs_every_kernel_true_runs_every_pass(program):
    prog, args = program
    off = prog.load_method("forward", optimize=False)
    on = prog.load_method("forward", optimize=True)
    assert off._steps is None and set(_status(off).values()) == {"off"}
    assert set(_status(on).values()) == {"ran"} and on.load_report["prepare_kernels"].changed
    assert on.execute(args)[0].tobytes() == off.execute(args)[0].tobytes()
    text = str(on.load_report)
    assert "prepare_kernels" in text and "ran" in text


def test_a_set_of_names_runs_those_alone(program):
    prog, _ = program
    m = prog.load_method("forward", optimize={"fold_constants"})
    status = _status(m)
    assert status["fold_constants"] == "ran" and status["prepare_kernels"] == "off"


def test_unknown_names_are_refused_with_the_list(program):
    prog, _ = program
    with pytest.raises(InvalidArgumentError, match="prepare_kernel.*prepare_kernels"):
        prog.load_method("forward", optimize={"prepare_kernel"})


@pytest.mark.parametrize("value,expect", [("off", "off"), ("0", "off"), ("all", "ran"),
                                          ("1", "ran"), ("", "ran")])
def test_the_environment_variable_is_read_at_each_load(program, monkeypatch, value, expect):
    prog, _ = program
    monkeypatch.setenv(optimize.ENV_VAR, value)
    assert _status(prog.load_method("forward"))["prepare_kernels"] == expect
    monkeypatch.setenv(optimize.ENV_VAR, "fold_constants, prepare_kernels")
    status = _status(prog.load_method("forward"))
    assert status["prepare_kernels"] == "ran" and status["forward_copies"] == "off"


def _broken(partial_first: bool):
    """A pass that replaces the first instruction by a step that would fail, then raises."""
    def broken_pass(flow, plan):
        if partial_first:
            plan.replace(0, [lambda: 1 / 0])
        raise KeyError("a bug in the pass")
    return Pass("broken_pass", broken_pass, doc="fails on purpose")


@pytest.mark.parametrize("partial_first", [False, True])
def test_strict_mode_makes_a_broken_pass_fail_the_load(program, monkeypatch, partial_first):
    prog, _ = program
    monkeypatch.setenv(optimize.STRICT_ENV_VAR, "1")
    monkeypatch.setattr(optimize, "PASSES", optimize.PassList([*PASSES, _broken(partial_first)]))
    with pytest.raises(OptimizationError, match="broken_pass.*KeyError.*a bug in the pass"):
        prog.load_method("forward", optimize=True)


@pytest.mark.parametrize("partial_first", [False, True])
def test_without_strict_mode_a_broken_pass_is_reported_warned_and_undone(
        program, monkeypatch, partial_first):
    prog, args = program
    monkeypatch.setenv(optimize.STRICT_ENV_VAR, "0")
    monkeypatch.setattr(optimize, "PASSES", optimize.PassList([*PASSES, _broken(partial_first)]))
    with pytest.warns(RuntimeWarning, match="broken_pass.*skipped"):
        m = prog.load_method("forward", optimize=True)
    (failed,) = m.load_report.failed
    assert failed.name == "broken_pass" and "a bug in the pass" in failed.error
    assert _status(m)["prepare_kernels"] == "ran"  # the others still ran
    want = prog.load_method("forward", optimize=False).execute(args)[0]
    assert m.execute(args)[0].tobytes() == want.tobytes()  # its half-done work undone


def test_a_step_built_at_load_falls_back_under_the_guard(monkeypatch):
    """BatchNorm folding builds its step at load, under the guard of that one build: if it
    fails, the instructions keep their kernels (reported), or the load raises in strict mode."""
    from edgetorch.exir import ExecutorchBackendConfig
    from edgetorch.runtime.optimize import batch_norm

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    x = torch.randn(1, 3, 8, 8)
    pte = to_edge(torch.export.export(model, (x,))).to_executorch(
        ExecutorchBackendConfig(fuse_batch_norm=False)).buffer
    prog = Runtime.get().load_program(pte)
    folded = prog.load_method("forward", optimize={"fold_batch_norm"})
    assert folded.load_report["fold_batch_norm"].changed == 2

    def broken(*args):
        raise ValueError("cannot fold")
    monkeypatch.setattr(batch_norm, "_frozen", broken)
    monkeypatch.setenv(optimize.STRICT_ENV_VAR, "0")
    with pytest.warns(RuntimeWarning, match="fold_batch_norm.*cannot fold"):
        m = prog.load_method("forward", optimize={"fold_batch_norm"})
    assert m.load_report.failed[0].name == "fold_batch_norm"
    got = m.execute([x.numpy()])[0]
    want = prog.load_method("forward", optimize=False).execute([x.numpy()])[0]
    assert got.tobytes() == want.tobytes()
    monkeypatch.setenv(optimize.STRICT_ENV_VAR, "1")
    with pytest.raises(OptimizationError, match="cannot fold"):
        prog.load_method("forward", optimize={"fold_batch_norm"})


def test_a_preparer_failing_where_its_kernel_works_is_the_pass_bug(program, monkeypatch):
    """A preparer that raises on arguments its kernel takes fails the pass (strict mode: the
    load); one that raises where the kernel fails too (a malformed file's arguments) declines,
    and the kernel fails at run time, as without the pass."""
    import dataclasses

    from edgetorch.errors import KernelError
    from edgetorch.kernels import registry

    prog, args = program
    entry = registry.KERNELS["aten::relu.out"]

    def preparer_bug(x, out):
        raise TypeError("a bug in the preparer")
    monkeypatch.setitem(registry.KERNELS, entry.name,
                        dataclasses.replace(entry, prepare=preparer_bug))
    monkeypatch.setenv(optimize.STRICT_ENV_VAR, "1")
    with pytest.raises(OptimizationError, match="prepare_kernels.*a bug in the preparer"):
        prog.load_method("forward", optimize={"prepare_kernels"})

    def kernel_refuses(x, out):
        raise TypeError("refused")
    monkeypatch.setitem(registry.KERNELS, entry.name,
                        dataclasses.replace(entry, fn=kernel_refuses, prepare=preparer_bug))
    m = prog.load_method("forward", optimize={"prepare_kernels"})
    assert _status(m)["prepare_kernels"] == "ran"
    with pytest.raises(KernelError, match="relu.*TypeError: refused"):
        m.execute(args)
