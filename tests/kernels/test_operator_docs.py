"""docs/operators.md is generated from the kernel table: regenerate it when it is stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")

from edgetorch.kernels import KERNELS  # noqa: E402
from edgetorch.kernels.support import (  # noqa: E402
    EXECUTORCH_OPTIMIZED_ONLY,
    EXECUTORCH_PORTABLE,
    EXECUTORCH_PRIM,
    LEFT_OUT,
)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_operator_docs.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_operator_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_executorch_operator_has_a_kernel_or_a_reason():
    missing = sorted(n for n in EXECUTORCH_PORTABLE | EXECUTORCH_PRIM | EXECUTORCH_OPTIMIZED_ONLY
                     if n not in KERNELS and n not in LEFT_OUT)
    assert not missing, f"ExecuTorch 1.5 operators without a kernel or a reason: {missing}"


def test_operator_docs_are_current():
    gen = _generator()
    text = gen.render()
    if gen.DOC.exists() and gen.DOC.read_text() == text:
        return
    gen.DOC.parent.mkdir(parents=True, exist_ok=True)
    gen.DOC.write_text(text)
    pytest.fail(f"{gen.DOC} was out of date and has been regenerated; commit it")
