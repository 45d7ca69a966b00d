"""Fixtures for the VGF tests: the model converter (``edgetorch[vgf]``) and ExecuTorch 1.5.1's
VGF flow in its reference venv (``$EDGETORCH_REF_VGF_PYTHON``, default ``.venv-ref-vgf`` of
this checkout or of /work/main; ``make ref-vgf``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
for extra in (HERE, HERE.parent, HERE.parent / "ethosu"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import ref_process  # noqa: E402
from arm_env import require_tosa_tools, skip_or_fail  # noqa: E402

require_tosa_tools()

REF_TOOL = HERE / "ref_vgf.py"
_FALLBACKS = (REPO / ".venv-ref-vgf/bin/python", Path("/work/main/.venv-ref-vgf/bin/python"))


def ref_vgf_python() -> Path | None:
    override = os.environ.get("EDGETORCH_REF_VGF_PYTHON")
    if override:
        return Path(override) if Path(override).exists() else None
    return next((p for p in _FALLBACKS if p.exists()), None)


@pytest.fixture(scope="session")
def converter():
    from edgetorch.backends.arm.vgf.model_converter import find_model_converter_binary

    binary = find_model_converter_binary()
    if binary is None:
        why = ("the ML SDK model converter is not installed: pip install 'edgetorch[vgf]' "
               "(ai-ml-sdk-model-converter==0.11.0; make test-arm installs it)")
        skip_or_fail(why)
    return binary


@pytest.fixture(scope="session")
def ml_sdk():
    """Arm's ML SDK for Vulkan as the runtime finds it (scenario-runner, emulation layer,
    lavapipe); missing: a skip, a failure under CI."""
    from edgetorch.backends.arm.runtime.vgf_scenario import find_ml_sdk

    sdk, why = find_ml_sdk()
    if sdk is None:
        why = f"the ML SDK scenario-runner cannot run here: {why} (make test-arm sets it up)"
        skip_or_fail(why)
    return sdk


@pytest.fixture(scope="session")
def ref_vgf(tmp_path_factory):
    """``get(model, tosa_spec)``: the folder ``ref_vgf.py`` wrote with ExecuTorch 1.5.1."""
    root = tmp_path_factory.mktemp("vgf_ref")
    made: dict[tuple[str, str], Path] = {}

    def get(model: str, spec: str) -> Path:
        if (model, spec) not in made:
            python = ref_vgf_python()
            if python is None:
                pytest.skip("reference ExecuTorch (vgf) environment not found; run `make "
                            "ref-vgf` or set EDGETORCH_REF_VGF_PYTHON")
            out = root / f"ref_{model}_{spec.replace('+', '_')}"
            # ExecuTorch looks for model-converter on PATH: the reference venv's bin first
            env = {**os.environ, "PATH": os.pathsep.join([str(python.parent),
                                                          os.environ.get("PATH", "")])}
            proc = ref_process.run([str(python), str(REF_TOOL), model, spec, str(out)],
                                   capture_output=True, text=True, timeout=1800, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"ref_vgf.py failed:\n{proc.stderr[-4000:]}")
            made[(model, spec)] = out
        return made[(model, spec)]

    return get
