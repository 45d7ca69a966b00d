"""Whole models through the command-stream simulator: ExecuTorch 1.5.1's own Ethos-U ``.pte``
files and ours, U55 and U65. Each delegate's command stream is simulated and compared with
tosa-tools' reference model on the delegate's TOSA graph (``simulation='compare'`` raises on any
difference), and a run without the TOSA (``simulation='npu'``) gives the same outputs. The TOSA
graphs are also compiled by Vela for every U55/U65 MAC config and compared the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from ethosu_util import load_npz
from npu_util import (
    U55_U65,
    compare_with_reference,
    compile_pte,
    float_inputs,
    run_pte,
    vela_blob,
)

MODELS = ["add", "convnet", "partial"]
TARGETS = ["ethos-u55-128", "ethos-u65-256"]
TRIALS = 4


def _check_pte(pte, example, seed: int, **options) -> int:
    """Simulate every delegate both ways on random inputs; returns the delegate count."""
    rng = np.random.default_rng(seed)
    for _ in range(TRIALS):
        inputs = float_inputs(example, rng)
        compared, handles = run_pte(pte, inputs, "compare", **options)
        assert handles and all(h.last_compare is not None for h in handles)
        assert all(d == 0 for h in handles for d in h.last_compare)
        assert all(h.npu.last_stats.ops for h in handles)
        npu_only, handles_npu = run_pte(pte, inputs, "npu", **options)
        assert all(h.runner is None for h in handles_npu)
        for a, b in zip(compared, npu_only, strict=True):
            np.testing.assert_array_equal(a, b)
    return len(handles)


@pytest.mark.compat
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_executorch_pte_command_stream(ref_arm, model, target):
    out = ref_arm(model, target)
    # ExecuTorch's TOSA graphs from the folder it wrote them to (named, as a user would: the
    # bytes carry no folder, and this process may not have compiled the same blob itself)
    n = _check_pte((out / "model.pte").read_bytes(), load_npz(out / "inputs.npz"), seed=1,
                   intermediates=str(out / "inter"))
    assert n == (2 if model == "partial" else 1)


@pytest.mark.compat
@pytest.mark.parametrize("model", MODELS)
def test_executorch_tosa_every_mac_config(ref_arm, model):
    tosas = sorted((ref_arm(model, "ethos-u55-128") / "inter").glob("output_tag*.tosa"))
    assert tosas
    for tosa in tosas:
        for target in U55_U65:
            diffs, _ = compare_with_reference(tosa.read_bytes(), vela_blob(tosa.read_bytes(), target),
                                              trials=TRIALS, seed=2)
            assert diffs == [0] * TRIALS, (tosa.name, target, diffs)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_our_pte_command_stream(tmp_path, model, target):
    from ethosu_models import MODELS as FACTORIES

    net, example = FACTORIES[model]()
    pte = compile_pte(net, example, target, str(tmp_path / "inter") + "/")
    n = _check_pte(pte, example, seed=3)
    assert n >= 1


@pytest.mark.slow
@pytest.mark.compat
def test_executorch_mv2_command_stream(ref_aot, monkeypatch):
    """ExecuTorch's aot_arm_compiler MobileNetV2 for U55-128, and its TOSA for every config."""
    monkeypatch.setenv("EDGETORCH_AOT_MODEL", "mv2")
    out = ref_aot("mv2", "ethos-u55-128")
    pte = (out / "aot_models_arm_delegate_ethos-u55-128.pte").read_bytes()
    x = [np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)]
    compared, handles = run_pte(pte, x, "compare")
    assert [h.last_compare for h in handles] == [[0]]
    assert handles[0].npu.last_stats.ops["conv"] > 30
    np.testing.assert_array_equal(run_pte(pte, x, "npu")[0][0], compared[0])
    (tosa,) = sorted((out / "inter").glob("output_tag*.tosa"))
    for target in U55_U65:
        diffs, _ = compare_with_reference(tosa.read_bytes(), vela_blob(tosa.read_bytes(), target),
                                          trials=1, seed=5)
        assert diffs == [0], (target, diffs)


@pytest.mark.slow
def test_our_mv2_command_stream(tmp_path):
    import arm_models

    net, example = arm_models.mv2()
    pte = compile_pte(net, example, "ethos-u65-256", str(tmp_path / "inter") + "/")
    x = [np.random.default_rng(6).standard_normal(np.asarray(example[0]).shape).astype(np.float32)]
    compared, handles = run_pte(pte, x, "compare")
    assert [h.last_compare for h in handles] == [[0]]
