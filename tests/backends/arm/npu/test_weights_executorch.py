"""ExecuTorch 1.5.1's own Ethos-U ``.pte`` files: the weights and scales decoded from each
delegate's command stream equal the quantized weights, biases and rescales of the TOSA graph
ExecuTorch wrote for that partition (its intermediates). Built in ``.venv-ref-arm`` by
``tests/backends/arm/ethosu/ref_ethosu.py``, as the Ethos-U tests do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("ethosu.mlw_codec", reason="the NPU weight tests need ethos-u-vela (make test-arm)")
pytest.importorskip("tosa_reference_model", reason="the NPU weight tests need tosa-tools")

import ref_process  # noqa: E402
from npu_weight_streams import check_pte  # noqa: E402

pytestmark = pytest.mark.compat
REF_TOOL = Path(__file__).resolve().parents[1] / "ethosu" / "ref_ethosu.py"
REF_ARM_PYTHON = Path(os.environ.get("EDGETORCH_REF_ARM_PYTHON",
                                     "/work/main/.venv-ref-arm/bin/python"))


def executorch_pte(model: str, target: str, tmp_root: Path) -> Path:
    """ExecuTorch's .pte + intermediates; shares ``$EDGETORCH_ETHOSU_REF_CACHE`` (same folder
    names) with the Ethos-U tests' ``ref_arm`` fixture."""
    if not REF_ARM_PYTHON.exists():
        pytest.skip(f"reference ExecuTorch (ethos-u) python {REF_ARM_PYTHON} is missing")
    root = Path(os.environ.get("EDGETORCH_ETHOSU_REF_CACHE", tmp_root))
    out = root / f"{model}_{target}"
    if not (out / "model.pte").exists():
        proc = ref_process.run([str(REF_ARM_PYTHON), str(REF_TOOL), model, target, str(out)],
                               capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"ref_ethosu.py {model} {target} failed:\n{proc.stderr[-4000:]}")
    return out


@pytest.mark.parametrize("model,target", [("convnet", "ethos-u55-128"),
                                          ("partial", "ethos-u55-128"),
                                          ("convnet", "ethos-u65-512"),
                                          ("convnet", "ethos-u85-256"),
                                          ("partial", "ethos-u85-256")])
def test_executorch_pte_weights_equal_its_tosa(model, target, tmp_path_factory, tmp_path):
    out = executorch_pte(model, target, tmp_path_factory.mktemp("ethosu_ref"))
    tosas = [p.read_bytes() for p in sorted((out / "inter").glob("output_*.tosa"))]
    assert check_pte((out / "model.pte").read_bytes(), tosas, tmp_path) >= 1
