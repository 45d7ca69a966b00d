"""The optional compiled-kernel switch (edgetorch.kernels.accel)."""

import numpy as np
import pytest

from edgetorch.kernels import accel


@accel.jit
def _scaled_sum(x, k):
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i] * k
    return total


def test_disabled_block_turns_compiled_paths_off(monkeypatch):
    monkeypatch.delenv(accel.ENV_VAR, raising=False)
    with accel.disabled():
        assert not accel.available()


def test_environment_variable_turns_compiled_paths_off(monkeypatch):
    monkeypatch.setenv(accel.ENV_VAR, "0")
    accel.reset()
    try:
        assert not accel.available()
        monkeypatch.setenv(accel.ENV_VAR, "1")
        assert not accel.available()  # read once: kernels ask on every call
    finally:
        monkeypatch.undo()
        accel.reset()


def test_compiled_loop_equals_its_python_source():
    pytest.importorskip("numba")
    x = np.arange(10, dtype=np.float64)
    with accel.enabled():
        assert accel.available()
        assert _scaled_sum(x, 2.0) == _scaled_sum.py_func(x, 2.0) == 90.0


@accel.jit
def _clamped_sum(x, lo, hi):
    total = 0.0
    for i in range(x.shape[0]):
        total += min(max(x[i], lo), hi)
    return total


def test_a_loop_compiled_while_torch_export_swaps_min_and_max_still_compiles(monkeypatch):
    # torch.export's non-strict tracing replaces builtins.min/max with functools.partial
    # objects while it runs; a loop compiled meanwhile (the warm-up thread, another thread's
    # runtime) must still see the real builtins.
    pytest.importorskip("numba")
    import builtins
    import functools

    monkeypatch.setattr(builtins, "min", functools.partial(builtins.min))
    monkeypatch.setattr(builtins, "max", functools.partial(builtins.max))
    x = np.array([-3.0, 0.5, 7.0])
    with accel.enabled():
        assert _clamped_sum(x, 0.0, 1.0) == 1.5
    monkeypatch.undo()
    assert _clamped_sum.py_func(x, 0.0, 1.0) == 1.5


@accel.jit
def _sum_of_scaled_sums(x, k):
    # calls another @jit loop by its global name: compiled, it calls that loop's compiled
    # function; as Python, the loop object itself
    return _scaled_sum(x, k) + _scaled_sum(x, 2 * k)


def test_a_loop_calls_another_compiled_loop():
    pytest.importorskip("numba")
    x = np.arange(4, dtype=np.float64)
    with accel.enabled():
        assert _sum_of_scaled_sums(x, 1.0) == 18.0
        assert _sum_of_scaled_sums.py_func(x, 1.0) == 18.0
        # the compiled caller holds the callee's numba dispatcher, not the Python loop object
        assert _scaled_sum.compiled() in _sum_of_scaled_sums.compiled().py_func.__globals__.values()
