"""Fixtures for the XNNPACK backend tests: the checked-in ExecuTorch-made program (torch-free)
and, for compat tests, programs that the reference ExecuTorch lowers to XNNPACK on demand."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(HERE.parents[1] / "compat"))  # refenv (tests/ has no __init__.py)
sys.path.insert(0, str(HERE))

from refenv import RefToolError, ref_available, ref_export  # noqa: E402
from xnn_helpers import MODELS  # noqa: E402


@pytest.fixture(scope="session")
def tiny_pte() -> bytes:
    return (FIXTURES / "et_tiny_classifier_xnnpack.pte").read_bytes()


@pytest.fixture(scope="session")
def tiny_io() -> tuple[np.ndarray, np.ndarray]:
    with np.load(FIXTURES / "et_tiny_classifier_xnnpack.io.npz") as d:
        return d["input_0"], d["output_0"]


class _Exports:
    """ExecuTorch exports of the examples with --xnnpack, made once per session, all at once
    in parallel subprocesses. They are large (MobileNetV2 ~14 MB), so they live in a
    temporary directory, not in the repo."""

    def __init__(self, root: Path) -> None:
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._futures = {
            name: self._pool.submit(ref_export, name, root / f"{name}.xnnpack.pte", True)
            for name in MODELS
        }

    def get(self, name: str):
        try:
            return self._futures[name].result()
        except RefToolError as e:
            pytest.fail(f"ExecuTorch could not export {name} with XNNPACK: {e}")


@pytest.fixture(scope="session")
def xnnpack_exports(tmp_path_factory):
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    exports = _Exports(tmp_path_factory.mktemp("xnnpack-exports"))
    yield exports
    exports._pool.shutdown(wait=True)
