"""The Cortex-M tests import their helpers (models, the CMSIS-NN oracle) from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _dir in (HERE, HERE.parent / "arm"):
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))


import os  # noqa: E402

import pytest  # noqa: E402
import ref_process  # noqa: E402
from arm_env import ref_arm_python  # noqa: E402

REF_TOOL = HERE / "ref_cortex_m.py"


@pytest.fixture(scope="session")
def ref_cortex_m(tmp_path_factory):
    """``get(model, target)``: the folder ``ref_cortex_m.py`` wrote with ExecuTorch 1.5.1
    (``executorch[ethos-u]``, ``$EDGETORCH_REF_ARM_PYTHON``); ``$EDGETORCH_CORTEX_M_REF_CACHE``
    keeps the folders between runs (a lowering takes a minute or more)."""
    cache = os.environ.get("EDGETORCH_CORTEX_M_REF_CACHE")
    root = Path(cache) if cache else tmp_path_factory.mktemp("cortex_m_ref")
    made: dict[tuple[str, str], Path] = {}

    def get(model: str, target: str) -> Path:
        if (model, target) not in made:
            out = root / f"{model}_{target}"
            if not (out / "values.npz").exists():
                python = ref_arm_python()
                if python is None:
                    pytest.skip("reference ExecuTorch (ethos-u) python not found; run "
                                "`make ref-arm` or set EDGETORCH_REF_ARM_PYTHON")
                proc = ref_process.run([str(python), str(REF_TOOL), model, target,
                                       str(out)], capture_output=True, text=True, timeout=1800)
                if proc.returncode != 0:
                    raise RuntimeError(f"ref_cortex_m.py {model} {target} failed:\n"
                                       f"{proc.stderr[-4000:]}")
            made[(model, target)] = out
        return made[(model, target)]

    return get
