"""Fixtures of the command-stream simulator's tests.

``our_tosa(name)``: the TOSA graph(s) edgetorch's Ethos-U flow writes for a model of
``npu_models.py`` (torch in .venv-arm). ``et_ops(name)``: ExecuTorch 1.5.1's output folder for
such a model (``ref_npu.py`` in the Arm reference venv, every requested model in one process).
``ref_arm`` is the Ethos-U tests' fixture (ExecuTorch's ``.pte`` + intermediates of the flow's
models). ``$EDGETORCH_ETHOSU_REF_CACHE`` keeps all of them between runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import ref_process

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE.parent / "ethosu", HERE.parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

pytest.importorskip("tosa_reference_model", reason="the NPU tests need tosa-tools (make test-arm)")
pytest.importorskip("ethosu.vela", reason="the NPU tests need ethos-u-vela (make test-arm)")

_spec = importlib.util.spec_from_file_location("_ethosu_conftest", HERE.parent / "ethosu" / "conftest.py")
_ethosu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ethosu)
ref_arm = _ethosu.ref_arm  # noqa: F811 - re-exported fixture
fresh_process = _ethosu.fresh_process
ref_aot = _ethosu.ref_aot
REF_ARM_PYTHON = _ethosu.REF_ARM_PYTHON


def _cache_root(tmp_path_factory, name: str) -> Path:
    root = os.environ.get("EDGETORCH_ETHOSU_REF_CACHE")
    return Path(root) / name if root else tmp_path_factory.mktemp(name)


@pytest.fixture(scope="session")
def our_tosa(tmp_path_factory):
    from npu_models import MODELS
    from npu_util import tosa_files

    root = _cache_root(tmp_path_factory, "npu_ours")
    made: dict[str, list[bytes]] = {}

    def get(name: str) -> list[bytes]:
        if name not in made:
            out = root / name
            files = sorted(out.glob("output_*.tosa")) or tosa_files(*MODELS[name](), out)
            made[name] = [f.read_bytes() for f in files]
        return made[name]

    return get


def _executorch_lowered(tmp_path_factory, cache: str, target: str, names) -> Callable:
    """``get(name) -> folder`` with ExecuTorch's ``model.pte`` and ``inter/``; the first call
    lowers every model of ``names`` for ``target`` (one ExecuTorch process)."""
    root = _cache_root(tmp_path_factory, cache)

    def get(name: str) -> Path:
        out = root / name
        if not (out / "model.pte").exists() and not (out / "error").exists():
            if not REF_ARM_PYTHON.exists():
                pytest.skip(f"reference ExecuTorch (ethos-u) python {REF_ARM_PYTHON} is missing")
            proc = ref_process.run([str(REF_ARM_PYTHON), str(HERE / "ref_npu.py"), str(root),
                                   target, *names], capture_output=True, text=True,
                                   timeout=3600)
            if proc.returncode != 0:
                raise RuntimeError(f"ref_npu.py failed:\n{proc.stderr[-4000:]}")
        if (out / "error").exists():
            raise RuntimeError(f"ExecuTorch could not lower {name}:\n"
                               f"{(out / 'error').read_text()[-3000:]}")
        return out

    return get


@pytest.fixture(scope="session")
def et_ops(tmp_path_factory):
    """ExecuTorch's lowering of every model in ``test_ops.ET_OPS`` for ethos-u55-128."""
    from test_ops import ET_OPS

    return _executorch_lowered(tmp_path_factory, "npu_et_ops", "ethos-u55-128", ET_OPS)


@pytest.fixture(scope="session")
def et_ops_u85(tmp_path_factory):
    """Like ``et_ops`` for ``npu_models.U85_ONLY``, lowered for ethos-u85-128 (ExecuTorch
    delegates RESIZE only on the U85)."""
    from npu_models import U85_ONLY

    return _executorch_lowered(tmp_path_factory, "npu_et_ops_u85", "ethos-u85-128", U85_ONLY)
