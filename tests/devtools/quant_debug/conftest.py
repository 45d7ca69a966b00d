"""Shared fixtures of the quantization-debugging tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import edgetorch


@pytest.fixture(scope="module")
def local_ray():
    """A 2-CPU local Ray instance for the module's sweeps (Ray: the edgetorch[ray] extra)."""
    ray = pytest.importorskip("ray", reason="Ray is the optional extra edgetorch[ray]")
    # the workers import this tree's edgetorch and the tests' modules (digits, model factories)
    paths = [str(Path(__file__).parent), str(Path(edgetorch.__file__).parents[1])]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}})
    yield
    ray.shutdown()
