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
