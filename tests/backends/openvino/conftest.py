"""The OpenVINO tests run in their own venv (``make test-openvino``: torch + openvino + NNCF).
Elsewhere they skip, loudly; under CI (``CI=true``) a missing environment fails instead."""

from __future__ import annotations

import importlib.util

import pytest
from refenv import in_ci

_MISSING = [m for m in ("torch", "openvino", "nncf") if importlib.util.find_spec(m) is None]


@pytest.fixture(autouse=True)
def _openvino_environment():
    if _MISSING:
        why = (f"the OpenVINO test environment is missing {', '.join(_MISSING)}; run "
               "`make test-openvino` (it builds .venv-ov)")
        (pytest.fail if in_ci() else pytest.skip)(why)


@pytest.fixture(scope="session")
def ref_ov():
    """The OpenVINO reference environment (ExecuTorch 1.5.1 + its openvino extra)."""
    from refenv_openvino import ref_ov_status

    usable, why = ref_ov_status()
    if not usable:
        (pytest.fail if in_ci() else pytest.skip)(why)
    return why
