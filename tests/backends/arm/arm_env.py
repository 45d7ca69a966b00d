"""Shared helpers of the Arm tests: tosa-tools availability (a hard failure under CI) and the
Arm reference environment (``executorch[ethos-u]==1.5.1``) driven through ``ref_arm.py``."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import ref_process

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
REF_ARM_TOOL = HERE / "ref_arm.py"
MODELS = HERE / "arm_models.py"
ENV_VAR = "EDGETORCH_REF_ARM_PYTHON"
_FALLBACKS = (REPO / ".venv-ref-arm/bin/python", Path("/work/main/.venv-ref-arm/bin/python"))


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def skip_or_fail(why: str) -> None:
    """Skip the test for ``why`` -- except under CI, where a missing tool is a failure."""
    if in_ci():
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def require_tosa_tools() -> None:
    """Skip the module without tosa-tools -- except under CI, where that is a failure."""
    missing = [m for m in ("tosa_serializer", "tosa_reference_model")
               if importlib.util.find_spec(m) is None]
    if not missing:
        return
    why = (f"tosa-tools is not installed ({', '.join(missing)} missing); run the Arm tests "
           "with `make test-arm` (the .venv-arm venv, pyproject's `arm` extra)")
    if in_ci():
        pytest.fail(why, pytrace=False)
    pytest.skip(why, allow_module_level=True)


def ref_arm_python() -> Path | None:
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override) if Path(override).exists() else None
    return next((p for p in _FALLBACKS if p.exists()), None)


def model_spec(name: str) -> str:
    return f"{MODELS}:{name}"


def ref_tosa(model: str, tosa_spec: str, out_dir: Path) -> Path:
    """ExecuTorch's TOSA flow for ``model`` into ``out_dir`` (see ``ref_arm.py``); skips (fails
    under CI, via tests/compat/ci_guard.py) when the Arm reference environment is missing."""
    python = ref_arm_python()
    if python is None:
        pytest.skip(f"Arm reference environment (executorch[ethos-u]==1.5.1) not found; run "
                    f"`make ref-arm` or set {ENV_VAR}")
    proc = ref_process.run([str(python), str(REF_ARM_TOOL), "tosa", model_spec(model), tosa_spec,
                           str(out_dir)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"ref_arm.py failed for {model}:\n{proc.stderr[-3000:]}")
    return out_dir


def ours_src_on_path() -> None:
    src = str(REPO / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
