"""Every ``.pte`` edgetorch wrote while ExecuTorch's tests ran, run in ExecuTorch 1.5.1's runtime.

The outcome plugin keeps the programs (``ET_SUITE_PTE_DIR``); ``run_ptes.py`` runs them all,
first under the reference Python (which draws and saves the inputs), then under edgetorch's,
each side in one process restarted past a program that aborts it. The verdict per program:
``equal`` (ExecuTorch ran it and both outputs agree), ``differ``, ``failed``/``crashed`` in
ExecuTorch (the case the project's first rule forbids), or not run by edgetorch.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MAX_RESTARTS = 50


def _run_side(python: str, side: str, folder: Path, env: dict[str, str]) -> None:
    for _ in range(MAX_RESTARTS):
        before = len(list(folder.glob(f"*.{side}.*")))
        subprocess.run([python, str(HERE / "run_ptes.py"), side, str(folder)], env=env,
                       capture_output=True, timeout=3600)
        if not list(folder.glob(f"*.{side}.running")) or \
                len(list(folder.glob(f"*.{side}.*"))) == before:
            return
        # a program aborted the process: it keeps its .running marker; go on past it


def _load(path: Path) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


def _agree(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return False
        if x.dtype.kind == "f" or y.dtype.kind == "f":
            tol = 1e-2 if np.float16 in (x.dtype, y.dtype) else 1e-4
            if not np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=tol, atol=tol,
                               equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def check(folder: Path, python: str, env: dict[str, str], ref_python: str,
          ref_env: dict[str, str]) -> dict:
    """Run both sides over ``folder`` and return ``{verdict: [{pte, test, detail}]}``."""
    tests = {}
    index = folder / "index.jsonl"
    for line in index.read_text().splitlines() if index.exists() else []:
        rec = json.loads(line)
        tests[rec["pte"]] = rec["test"]
    _run_side(ref_python, "executorch", folder, ref_env)
    _run_side(python, "edgetorch", folder, env)
    verdicts: dict[str, list] = {}
    for pte in sorted(folder.glob("*.pte")):
        theirs, ours = pte.with_suffix(".executorch.npz"), pte.with_suffix(".edgetorch.npz")
        err = pte.with_suffix(".executorch.err")
        if theirs.exists() and ours.exists():
            verdict, detail = ("equal", "") if _agree(_load(theirs), _load(ours)) \
                else ("differ", "outputs differ")
        elif theirs.exists():
            verdict = "edgetorch_failed"
            ours_err = pte.with_suffix(".edgetorch.err")
            detail = ours_err.read_text().splitlines()[0] if ours_err.exists() else "crashed"
        elif err.exists():
            verdict, detail = "executorch_failed", err.read_text().splitlines()[0]
        else:
            verdict, detail = "executorch_crashed", "the process died running it"
        verdicts.setdefault(verdict, []).append(
            {"pte": pte.name, "test": tests.get(pte.name, ""), "detail": detail[:300]})
    return verdicts
