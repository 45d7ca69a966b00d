"""Fixtures of the Vulkan backend tests: ExecuTorch's own Vulkan exports of the same models
(made once per session by the reference venv, two at a time)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from delegate_checks import RefExports  # tests/support
from refenv import ref_available  # tests/compat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def vulkan_ref(tmp_path_factory):
    """``get(model, options, quant)``: ExecuTorch's ``.pte`` (``vk_ref.py``)."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    exports = RefExports(tmp_path_factory.mktemp("vulkan-ref"), HERE / "vk_ref.py",
                         ("--options", "--quant"))
    yield exports
    exports.pool.shutdown(wait=True)
