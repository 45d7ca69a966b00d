"""Find and drive the OpenVINO reference venv (``executorch[openvino]==1.5.1`` + nncf) from
our test process; everything ExecuTorch does runs in ``ref_openvino.py`` under it.

The interpreter is ``$EDGETORCH_REF_OV_PYTHON``, else ``<repo>/.venv-ref-ov/bin/python``
(``make test-openvino`` creates it), else the same path in the main checkout when the repo is
a git worktree. Status strings say "reference environment" so that ``ci_guard`` turns a skip
into a failure under CI.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import ref_process
from refenv import REPO_ROOT, load_npz

ENV_VAR = "EDGETORCH_REF_OV_PYTHON"
TOOL = Path(__file__).with_name("ref_openvino.py")
VENV = ".venv-ref-ov/bin/python"


def _main_checkout() -> Path | None:
    git = REPO_ROOT / ".git"
    if git.is_file():  # a worktree: "gitdir: <main>/.git/worktrees/<name>"
        text = git.read_text().strip()
        if text.startswith("gitdir:"):
            return Path(text.split(":", 1)[1].strip()).parents[2]
    return None


def ref_ov_python() -> Path:
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    main = _main_checkout()
    for candidate in (REPO_ROOT / VENV, *([main / VENV] if main else [])):
        if candidate.exists():
            return candidate
    return REPO_ROOT / VENV


_PROBE = ("import importlib.metadata as m, sys\n"
          "v = {p: m.version(p) for p in ('executorch', 'openvino', 'nncf')}\n"
          "sys.exit(0 if v['executorch'] == '1.5.1' else f'executorch {v} installed, 1.5.1 "
          "expected')\n")


@functools.cache
def ref_ov_status() -> tuple[bool, str]:
    python = ref_ov_python()
    if not python.exists():
        return False, (f"OpenVINO reference environment {python} does not exist; run "
                       f"`make test-openvino` or set {ENV_VAR}")
    result = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True,
                            timeout=120, env=_clean_env())
    if result.returncode != 0:
        return False, (f"OpenVINO reference environment {python} is unusable: "
                       f"{result.stderr.strip()[-800:]}")
    return True, f"OpenVINO reference environment {python}"


def _clean_env() -> dict[str, str]:
    return ref_process.clean_env()


def _run(args: list[str], timeout: float = 1200) -> None:
    usable, why = ref_ov_status()
    if not usable:
        raise RuntimeError(why)
    cmd = [str(ref_ov_python()), str(TOOL), *args]
    result = ref_process.run(cmd, capture_output=True, text=True, timeout=timeout,
                             env=_clean_env())
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-6000:]}")


def ref_ov_export(model: str, out: Path, quantize: bool = False) -> tuple[Path, list, list]:
    """ExecuTorch's OpenVINO-lowered .pte of an example, its inputs and eager outputs."""
    _run(["export", model, str(out), *(["--quantize"] if quantize else [])])
    return out, load_npz(out.with_suffix(".inputs.npz")), load_npz(out.with_suffix(".expected.npz"))


def _run_npz(verb: str, pte: Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    with tempfile.TemporaryDirectory(prefix="edgetorch-ov-") as tmp:
        in_npz, out_npz = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(in_npz, *inputs)
        _run([verb, str(pte), str(in_npz), str(out_npz)])
        return load_npz(out_npz)


def ref_ov_run(pte: Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a .pte in ExecuTorch 1.5.1's runtime (its OpenvinoBackend) and return the outputs."""
    return _run_npz("run", pte, inputs)


def ref_ov_run_many(pte: Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A one-input method run once per array in ExecuTorch's runtime; first outputs."""
    return _run_npz("runmany", pte, inputs)
