"""Whole-program features both ways with ExecuTorch 1.5.1: edgetorch's .pte (and .ptd) in
ExecuTorch's runtime, and ExecuTorch's .pte for the same module in edgetorch's runtime, each
scenario equal to eager PyTorch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from feature_models import FEATURES, run_scenario  # noqa: E402
from refenv import ref_available, ref_feature_export, ref_feature_run  # noqa: E402

from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

PTD = "_default_external_constant.ptd"


def _check(got, want, what):
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64),
                                   atol=1e-5, rtol=0, err_msg=f"{what}: output {i}")


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_edgetorch_program_runs_in_executorch(name, tmp_path):
    feature = FEATURES[name]()
    et = to_edge(feature.programs, constant_methods=feature.constant_methods).to_executorch(
        ExecutorchBackendConfig(**feature.config))
    pte = tmp_path / f"{name}.pte"
    pte.write_bytes(et.buffer)
    ptd = None
    if feature.config.get("external_constants"):
        et.write_tensor_data_to_file(tmp_path)
        ptd = tmp_path / PTD
    _check(ref_feature_run(name, pte, ptd), feature.expected(), f"{name} in ExecuTorch")


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_executorch_program_runs_in_edgetorch(name, tmp_path):
    pte = ref_feature_export(name, tmp_path)
    feature = FEATURES[name]()
    kwargs = {"data_path": tmp_path / PTD} if (tmp_path / PTD).exists() else {}
    program = Runtime.get().load_program(pte, **kwargs)
    _check(run_scenario(feature, program.load_method), feature.expected(), f"ExecuTorch's {name}")
