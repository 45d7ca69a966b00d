"""The reliability tests (memory over many calls, loads, threads, soak) check the runtime as
users get it: with every load pass (the rest of the suite loads with them off, the kernels
being the reference; see tests/conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _as_shipped(monkeypatch):
    monkeypatch.setenv("EDGETORCH_OPTIMIZE", "all")
