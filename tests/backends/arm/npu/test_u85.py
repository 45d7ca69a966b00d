"""The Ethos-U85 command-stream simulator (``regs_u85``, ``interp_u85``): its listing equals
Regor's ``--verbose-register-command-stream`` word for word, and its results equal tosa-tools'
reference model bit for bit -- ExecuTorch 1.5.1's own U85 ``.pte`` files and ours, every U85 MAC
config on the flow's models, and single-operator TOSA graphs compiled by Vela directly."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu_util import load_npz
from npu_models import U85_ONLY
from npu_util import compare_with_reference, compile_pte, vela_blob
from test_cmdstream import vela_listing
from test_models import _check_pte
from test_ops import ET_OPS, OURS
from test_tosa_direct import random_graph_diffs
from tosa_graphs import KINDS

from edgetorch.backends.arm.runtime.npu.cmdstream import parse_driver_payload
from edgetorch.backends.arm.runtime.npu.listing import listing

U85 = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"]
TARGETS = ["ethos-u85-256", "ethos-u85-128"]
MODELS = ["add", "convnet"]
U85_XFAIL: dict[str, str] = {}
# Vela picks 2:4 sparse weights where the padded input channels make every group of four
# half zero (2 input channels padded to 4, every U85 config); weights.py does not decode them
OURS_XFAIL = {"conv5x5_nobias": "U85 2:4 sparse weights (WEIGHT_SPARSITY_SPARSE_2_4) are "
                                "not decoded yet"}


@pytest.mark.parametrize("kind", ["conv", "depthwise_int16", "add", "maximum_swapped", "table",
                                  "reduce_sum"])
def test_listing_equals_vela_u85(tmp_path, kind):
    target = U85[len(kind) % len(U85)]
    tosa = KINDS[kind](np.random.default_rng(len(kind)))
    payload = parse_driver_payload(vela_blob(tosa, target).cmd_data)
    assert payload.u85 and payload.product == "Ethos-U85"
    assert listing(payload).splitlines() == vela_listing(tosa, target, tmp_path)


@pytest.mark.compat
@pytest.mark.parametrize("name", ["upsample_nearest", "conv_transpose", "sigmoid@a16w8", "rsqrt",
                                  "softmax"])
def test_listing_equals_vela_u85_executorch_tosa(et_ops, tmp_path, name):
    """RESIZE, the accumulator from IFM2 with POOL NONE, 16-bit LUTs, chained/NONE storage."""
    for tosa in sorted((et_ops(name) / "inter").glob("output_*.tosa")):
        data = tosa.read_bytes()
        ours = listing(parse_driver_payload(vela_blob(data, "ethos-u85-128").cmd_data))
        assert ours.splitlines() == vela_listing(data, "ethos-u85-128", tmp_path)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_our_pte_u85(tmp_path, model, target):
    from ethosu_models import MODELS as FACTORIES

    net, example = FACTORIES[model]()
    pte = compile_pte(net, example, target, str(tmp_path / "inter") + "/")
    assert _check_pte(pte, example, seed=7) == 1
    tosas = sorted((tmp_path / "inter").glob("output_*.tosa"))
    for tosa in tosas:  # the same TOSA on every U85 MAC config
        for cfg in U85:
            diffs, prog = compare_with_reference(tosa.read_bytes(), vela_blob(tosa.read_bytes(), cfg),
                                                 trials=2, seed=8, target=cfg)
            assert prog.accelerator == cfg
            assert diffs == [0, 0], (model, cfg, diffs, str(prog.last_stats))


@pytest.mark.compat
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_executorch_pte_u85(ref_arm, model, target):
    out = ref_arm(model, target)
    # its TOSA graphs from the folder ExecuTorch wrote them to, named (as in test_models)
    assert _check_pte((out / "model.pte").read_bytes(), load_npz(out / "inputs.npz"), seed=9,
                      intermediates=str(out / "inter")) == 1


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_single_op_graph_u85(kind):
    compiled = sum(random_graph_diffs(kind, seed, U85[(seed + len(kind)) % len(U85)]) is not None
                   for seed in range(3))
    assert compiled >= 1, f"Vela compiled none of the {kind} graphs"


def _check_tosas(tosas: list[bytes], target: str, seed: int) -> None:
    assert tosas, "the flow produced no delegate"
    for k, tosa in enumerate(tosas):
        diffs, prog = compare_with_reference(tosa, vela_blob(tosa, target), trials=2, seed=seed,
                                             target=target)
        assert prog.last_stats.ops, "the command stream ran no operation"
        assert diffs == [0, 0], f"partition {k} on {target}: {diffs} ({prog.last_stats})"


def _params(names: list[str], gaps: dict[str, str]) -> list:
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=gaps[n])) if n in gaps
            else n for n in names]


@pytest.mark.parametrize("name", _params(OURS, OURS_XFAIL))
def test_op_from_our_tosa_u85(our_tosa, name):
    """One U85 config per model, all five configs over the list."""
    _check_tosas(our_tosa(name), U85[OURS.index(name) % len(U85)], seed=len(name))


@pytest.mark.compat
@pytest.mark.parametrize("name", _params(ET_OPS, U85_XFAIL))
def test_op_from_executorch_tosa_u85(et_ops, name):
    out = et_ops(name)
    _check_tosas([f.read_bytes() for f in sorted((out / "inter").glob("output_*.tosa"))],
                 U85[ET_OPS.index(name) % len(U85)], seed=len(name))


@pytest.mark.compat
@pytest.mark.parametrize("name", U85_ONLY)
def test_resize_bilinear_u85(et_ops_u85, name):
    """ExecuTorch's bilinear upsampling (RESIZE) on every U85 config."""
    tosas = [f.read_bytes() for f in sorted((et_ops_u85(name) / "inter").glob("output_*.tosa"))]
    for target in U85:
        _check_tosas(tosas, target, seed=len(name))


@pytest.mark.slow
@pytest.mark.compat
def test_executorch_mv2_u85(ref_aot, monkeypatch):
    """ExecuTorch's aot_arm_compiler MobileNetV2 for U85-128, run from its command stream."""
    from npu_util import run_pte

    monkeypatch.setenv("EDGETORCH_AOT_MODEL", "mv2")
    out = ref_aot("mv2", "ethos-u85-128")
    pte = (out / "aot_models_arm_delegate_ethos-u85-128.pte").read_bytes()
    x = [np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)]
    compared, handles = run_pte(pte, x, "compare")
    assert [h.last_compare for h in handles] == [[0]]
    assert handles[0].npu.accelerator == "ethos-u85-128"
    assert handles[0].npu.last_stats.ops["conv"] > 30
    np.testing.assert_array_equal(run_pte(pte, x, "npu")[0][0], compared[0])


@pytest.mark.slow
def test_our_mv2_u85(tmp_path):
    """Our flow's MobileNetV2 for U85-128, its command stream against the reference model."""
    import arm_models
    from npu_util import run_pte

    net, example = arm_models.mv2()
    pte = compile_pte(net, example, "ethos-u85-128", str(tmp_path / "inter") + "/")
    x = [np.random.default_rng(6).standard_normal(np.asarray(example[0]).shape).astype(np.float32)]
    compared, handles = run_pte(pte, x, "compare")
    assert [h.last_compare for h in handles] == [[0]]
    assert handles[0].npu.accelerator == "ethos-u85-128"
