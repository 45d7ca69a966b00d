"""Fixtures for the Ethos-U tests: ExecuTorch's own artifacts from the reference venv.

``ref_arm(model, target, external=None)`` runs ``ref_ethosu.py`` under ExecuTorch 1.5.1 with
the ethos-u extras (``$EDGETORCH_REF_ARM_PYTHON``, default ``/work/main/.venv-ref-arm``) once per
session and returns its output folder. ``$EDGETORCH_ETHOSU_REF_CACHE`` keeps the folders between
runs (ExecuTorch's Arm lowering takes tens of seconds per model).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import ref_process

HERE = Path(__file__).resolve().parent
REF_TOOL = HERE / "ref_ethosu.py"
REF_ARM_PYTHON = Path(os.environ.get("EDGETORCH_REF_ARM_PYTHON",
                                     "/work/main/.venv-ref-arm/bin/python"))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

pytest.importorskip("tosa_reference_model", reason="the Arm tests need tosa-tools (make test-arm)")
pytest.importorskip("ethosu.vela", reason="the Arm tests need ethos-u-vela (make test-arm)")


def ref_arm_available() -> bool:
    return REF_ARM_PYTHON.exists()


def run_ref(*args: str, timeout: float = 900) -> str:
    if not ref_arm_available():
        pytest.skip(f"reference ExecuTorch (ethos-u) python {REF_ARM_PYTHON} is missing")
    proc = ref_process.run([str(REF_ARM_PYTHON), str(REF_TOOL), *args], capture_output=True,
                           text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"ref_ethosu.py {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout


def ref_check(pte: Path, data: Path | None = None) -> dict:
    """What ExecuTorch 1.5.1 sees in a .pte: methods, I/O counts, delegates and specs."""
    args = ["--check", str(pte)] + (["--data", str(data)] if data else [])
    return json.loads(run_ref(*args).strip().splitlines()[-1])


@pytest.fixture(scope="session")
def ref_arm(tmp_path_factory):
    cache_root = os.environ.get("EDGETORCH_ETHOSU_REF_CACHE")
    root = Path(cache_root) if cache_root else tmp_path_factory.mktemp("ethosu_ref")
    made: dict[tuple, Path] = {}

    def get(model: str, target: str, external: str | None = None) -> Path:
        key = (model, target, external)
        if key not in made:
            name = f"{model}_{target}" + (f"_{external.replace('=', '-')}" if external else "")
            out = root / name
            if not (out / "model.pte").exists():
                run_ref(model, target, str(out), *(["--external", external] if external else []))
            made[key] = out
        return made[key]

    return get


@pytest.fixture(scope="session")
def ref_aot(tmp_path_factory):
    """ExecuTorch's own ``aot_arm_compiler`` on ``aot_models.py`` (``EDGETORCH_AOT_MODEL``):
    returns the output folder (``aot_models_arm_delegate_<target>.pte``, ``inter/``)."""
    cache_root = os.environ.get("EDGETORCH_ETHOSU_REF_CACHE")
    root = Path(cache_root) if cache_root else tmp_path_factory.mktemp("ethosu_aot_ref")
    made: dict[tuple, Path] = {}

    def get(model: str, target: str) -> Path:
        if (model, target) not in made:
            out = root / f"aot_{model}_{target}"
            pte = out / f"aot_models_arm_delegate_{target}.pte"
            if not pte.exists():
                if not ref_arm_available():
                    pytest.skip(f"reference ExecuTorch (ethos-u) python {REF_ARM_PYTHON} is missing")
                proc = ref_process.run(
                    [str(REF_ARM_PYTHON), "-m", "executorch.backends.arm.scripts.aot_arm_compiler",
                     f"--model_name={HERE / 'aot_models.py'}", "--delegate", "--quantize",
                     f"--intermediates={out / 'inter'}", f"--target={target}", f"--output={out}"],
                    capture_output=True, text=True, timeout=1800,
                    env={**os.environ, "EDGETORCH_AOT_MODEL": model})
                if proc.returncode != 0:
                    raise RuntimeError(f"ExecuTorch aot_arm_compiler failed:\n{proc.stderr[-4000:]}")
            made[(model, target)] = out
        return made[(model, target)]

    return get


@pytest.fixture
def fresh_process():
    """Forget what this process compiled: the simulation must find the TOSA on disk, as a new
    process would (otherwise it uses the graph kept in memory at compile time)."""
    from edgetorch.backends.arm.ethosu.compiled import COMPILED

    saved = dict(COMPILED)
    COMPILED.clear()
    yield
    COMPILED.update(saved)
