"""Fixtures of the Core ML backend tests: ExecuTorch's own Core ML exports (made once per
session by the reference venv, which has coremltools 9.0, two at a time)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "compat"))  # refenv (tests/ has no __init__.py)
sys.path.insert(0, str(HERE))

from refenv import _clean_env, ref_available, ref_python  # noqa: E402

REF_SCRIPT = HERE / "cm_ref.py"


class RefExports:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures: dict = {}

    def submit(self, model: str, specs: dict | None = None):
        key = (model, json.dumps(specs or {}, sort_keys=True))
        if key not in self.futures:
            out = self.root / f"{model}-{len(self.futures)}.pte"
            cmd = [str(ref_python()), str(REF_SCRIPT), "export", model, str(out), "--specs",
                   key[1]]
            self.futures[key] = self.pool.submit(self._run, cmd, out)
        return self.futures[key]

    @staticmethod
    def _run(cmd: list[str], out: Path) -> Path:
        r = subprocess.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise RuntimeError(f"ExecuTorch's Core ML export failed: {' '.join(cmd)}\n"
                               f"{r.stderr[-3000:]}")
        return out

    def get(self, model: str, specs: dict | None = None) -> Path:
        return self.submit(model, specs).result()


@pytest.fixture(scope="session")
def coreml_ref(tmp_path_factory):
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    exports = RefExports(tmp_path_factory.mktemp("coreml-ref"))
    yield exports
    exports.pool.shutdown(wait=True)
