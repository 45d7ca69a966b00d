"""Compiled kernels warm up in the background (edgetorch.kernels.accel): a fresh process's
first calls take the NumPy paths without importing numba, the plans built at load meanwhile
are rebuilt by the warm-up thread once it is done, and a process may exit while it runs. (How long the first call takes
is a benchmark figure: bench/bench_first_call.py.)"""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba")
torch = pytest.importorskip("torch")

CHILD = r"""
import sys, threading
import numpy as np
from edgetorch.kernels import accel
gate = threading.Event()
warm_up = accel._warm_up
accel._warm_up = lambda: (gate.wait(), warm_up())  # the warm-up waits for the test
from edgetorch.runtime import Runtime

inputs = [np.load(sys.argv[2])]
want = np.load(sys.argv[3])
method = Runtime.get().load_program(sys.argv[1]).load_method("forward")
steps = method._steps
assert accel.pending() and steps is not None, "the passes ran at load (NumPy paths)"
handles = [h for _, h in method._delegate_handles]
plans = [dict(h.plans) for h in handles]
assert all(p and h.warming for p, h in zip(plans, handles)), "XNNPACK planned at load"
for _ in range(3):
    got = method.execute(inputs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
assert "numba" not in sys.modules, "the first calls took the NumPy paths"
assert method._steps is steps and [h.plans for h in handles] == plans, "nothing built by calls"
gate.set()
assert accel.wait_until_warm(600) and accel.available() and not accel.pending()
assert method._steps is not steps and not method._rerun_when_warm and \
    all(not h.warming for h in handles), "rebuilt by the warm-up thread, before the next call"
for _ in range(3):
    got = method.execute(inputs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
assert method._steps is not steps, "the passes ran again once the compiled kernels are ready"
assert all(h.plans and not h.warming and h.plans != p for p, h in zip(plans, handles)), \
    "XNNPACK planned again once the compiled kernels are ready"
print("ok", len(handles))
"""


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 16, 3, padding=1)  # Winograd: compiled transforms
        self.norm = torch.nn.LayerNorm(8)  # a compiled row loop
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(self.norm(torch.relu(self.conv(x))))


def _env(numba_cache=None):
    """The background warm-up and the load passes (the users' defaults); numba's cache: this
    process's, unless ``numba_cache`` (a fresh one compiles every kernel: minutes on a busy
    machine)."""
    import os

    env = dict(os.environ, EDGETORCH_ACCEL_WARMUP="background", EDGETORCH_OPTIMIZE="all")
    if numba_cache is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache)
    env.pop("EDGETORCH_ACCEL", None)
    return env


@pytest.mark.parametrize("xnnpack", [False, True], ids=["portable", "xnnpack"])
def test_first_calls_run_plans_built_at_load_then_plans_are_rebuilt(tmp_path, xnnpack):
    from edgetorch.exir import to_edge, to_edge_transform_and_lower

    torch.manual_seed(0)
    model, x = _Net().eval(), torch.randn(1, 16, 8, 8)
    ep = torch.export.export(model, (x,))
    if xnnpack:
        from edgetorch.backends.xnnpack import XnnpackPartitioner

        program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        program = to_edge(ep)
    (tmp_path / "m.pte").write_bytes(program.to_executorch().buffer)
    np.save(tmp_path / "x.npy", x.numpy())
    with torch.no_grad():
        np.save(tmp_path / "want.npy", model(x).numpy())
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "m.pte"),
                           str(tmp_path / "x.npy"), str(tmp_path / "want.npy")],
                          capture_output=True, text=True, timeout=900, env=_env())
    assert proc.returncode == 0, proc.stderr
    ok, delegates = proc.stdout.split()
    assert ok == "ok" and (int(delegates) > 0) == xnnpack


def test_a_process_may_exit_while_warming_up(tmp_path):
    code = ("from edgetorch.kernels import accel\n"
            "assert not accel.available() and accel.pending()\n")  # starts it, exits at once
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=_env(tmp_path / "numba"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_the_tests_wait_for_the_compiled_kernels():
    from edgetorch.kernels import accel

    assert accel.available() and not accel.pending()  # tests/conftest.py: warm-up "wait"


PAUSE_CHILD = r"""
import sys, time
from edgetorch.kernels import accel
accel.PAUSE_S, accel.PAUSE_BUDGET_S = 600.0, 600.0  # (the call below ends the pause)
assert accel.call_started(), "a load or call before the warm-up starts is counted"
assert not accel.available()  # starts the warm-up: it pauses before its first import
time.sleep(0.5)
assert "numba" not in sys.modules and not accel.wait_until_warm(0), "paused during the call"
accel.call_ended()
assert accel.wait_until_warm(600) and "numba" in sys.modules, "resumed when the call ended"
assert not accel.call_started(), "nothing to count once warm"
assert not any(type(f).__name__ == "_PauseBeforeImports" for f in sys.meta_path)
print("ok")
"""

BUDGET_CHILD = r"""
from edgetorch.kernels import accel
accel.PAUSE_S, accel.PAUSE_BUDGET_S = 0.05, 0.3
assert accel.call_started()  # a call that never ends
assert not accel.available()
assert accel.wait_until_warm(600), "the warm-up pauses within its budget, then goes on"
assert 0.25 <= accel._paused_s <= 1.0, accel._paused_s
print("ok")
"""


@pytest.mark.parametrize("child", [PAUSE_CHILD, BUDGET_CHILD], ids=["pauses", "budget"])
def test_the_warm_up_pauses_while_a_call_runs(child):
    """The warm-up waits at its pause points while a load or call runs (which would otherwise
    wait for the interpreter lock numba's import holds), within a bounded budget."""
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=900, env=_env())
    assert proc.returncode == 0 and proc.stdout.split() == ["ok"], proc.stderr


def test_loads_and_calls_tell_the_warm_up(monkeypatch):
    from edgetorch.errors import InvalidArgumentError
    from edgetorch.kernels import accel
    from edgetorch.runtime import Runtime

    events = []
    monkeypatch.setattr(accel, "call_started", lambda: events.append("start") or True)
    monkeypatch.setattr(accel, "call_ended", lambda: events.append("end"))
    model, x = torch.nn.Linear(4, 3).eval(), torch.randn(2, 4)
    from edgetorch.exir import to_edge

    pte = to_edge(torch.export.export(model, (x,))).to_executorch().buffer
    method = Runtime.get().load_program(pte).load_method("forward")
    method.execute([x.numpy()])
    with pytest.raises(InvalidArgumentError):  # (a failing call ends too)
        method.execute([x.numpy()[:, :2]])
    assert events == ["start", "end"] * 3
