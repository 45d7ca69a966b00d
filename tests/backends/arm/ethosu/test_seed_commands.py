"""The two seed commands end to end: ``aot_arm_compiler --model_name=add ...`` and
``edgetorch arm run ... --model_name=mv2`` (the Arm learning path's run.sh line)."""

from __future__ import annotations

import shlex

import numpy as np
import pytest
import torch
from ethosu_util import structure

from conftest import HERE, ref_check
from edgetorch.backends.arm.scripts.aot_arm_compiler import main as aot_main
from edgetorch.cli import main as cli_main
from edgetorch.runtime import Runtime

SEED_RUN = ('--aot_arm_compiler_flags="--delegate --quantize --intermediates mv2_u85/ --debug '
            '--evaluate" --output=mv2_u85 --target=ethos-u85-128 --model_name=mv2')


def test_aot_arm_compiler_add(tmp_path, capsys):
    result = aot_main(["--model_name=add", "--delegate", "--quantize", "--target=ethos-u85-128",
                       f"--intermediates={tmp_path / 'inter'}", f"--output={tmp_path / 'out'}",
                       "--evaluate"])
    out = capsys.readouterr().out
    pte = tmp_path / "out" / "add_arm_delegate_ethos-u85-128.pte"
    assert result.output == str(pte) and pte.exists()
    assert "PTE file saved as" in out and "Vela estimates:" in out
    assert "Delegated partitions for silicon acceleration: 1" in out
    for name in ("add_exported_program.pt2", "delegation_info.txt",
                 "output_tag0_TOSA-1.0+INT+int16+int4+cf.tosa", "output/out_vela.npz"):
        assert (tmp_path / "inter" / name).exists(), name
    (row,) = result.evaluation["comparison"]
    assert row["max_steps"] <= 2
    (est,) = result.estimates
    assert est["target"] == "ethos-u85-128" and est["cycles_total"] > 0
    plan = Runtime.get().load_program(pte).program.execution_plan[0]
    assert {op.name for op in plan.operators} == {"cortex_m::quantize_per_tensor",
                                                  "cortex_m::dequantize_per_tensor"}


def test_aot_arm_compiler_small_transformer(tmp_path, monkeypatch):
    """Issue 31's reproduction: ``--model_name=<a .py with nn.MultiheadAttention, LayerNorm,
    GELU, softmax> --delegate --quantize --target=ethos-u55-128`` exports (what the lowering
    cannot take runs on the CPU) and runs within 2 steps of the quantized eager model."""
    monkeypatch.setenv("EDGETORCH_AOT_MODEL", "tiny_tfm")
    result = aot_main([f"--model_name={HERE / 'aot_models.py'}", "--delegate", "--quantize",
                       "--target=ethos-u55-128", f"--output={tmp_path}", "--evaluate"])
    (row,) = result.evaluation["comparison"]
    assert row["max_steps"] <= 2
    assert all(est["cpu_operators"] == 0 for est in result.estimates)


def test_aot_bundleio(tmp_path):
    from edgetorch.runtime.bundled import load_bundled_program

    result = aot_main(["--model_name=add", "--delegate", "--quantize", "--bundleio",
                       "--target=ethos-u55-128", f"--intermediates={tmp_path / 'i'}",
                       f"--output={tmp_path}"])
    assert result.output.endswith("add_arm_delegate_ethos-u55-128.bpte")
    bundled = load_bundled_program(result.output)
    assert bundled is not None


def _aot_ours_and_executorchs(ref_aot, tmp_path, model="add"):
    ref = ref_aot(model, "ethos-u85-128").resolve()
    et_pte = ref / "aot_models_arm_delegate_ethos-u85-128.pte"
    ours_dir = ref / "ours_"
    import os
    os.environ["EDGETORCH_AOT_MODEL"] = model
    try:
        result = aot_main([f"--model_name={HERE / 'aot_models.py'}", "--delegate", "--quantize",
                           f"--intermediates={ours_dir}", "--target=ethos-u85-128",
                           f"--output={tmp_path}"])
    finally:
        del os.environ["EDGETORCH_AOT_MODEL"]
    ours = open(result.output, "rb").read().replace(str(ours_dir).encode(),
                                                   str(ref / "inter").encode())
    return ours, et_pte.read_bytes()


@pytest.mark.compat
def test_aot_pte_matches_executorch(ref_aot, tmp_path):
    """ExecuTorch's aot_arm_compiler and ours on the same seeded model file: the same TOSA,
    delegate blob, compile specs (incl. the --verbose-* flags), cortex_m operators and
    instructions (the intermediates path stored in the .pte is a same-length sibling)."""
    ours, theirs = _aot_ours_and_executorchs(ref_aot, tmp_path)
    assert structure(ours) == structure(theirs)
    (tmp_path / "ours.pte").write_bytes(ours)
    seen = ref_check(tmp_path / "ours.pte")  # ExecuTorch 1.5.1 loads it
    assert seen["methods"] == ["forward"] and seen["delegates"][0]["id"] == "EthosUBackend"
    specs = structure(ours)["delegates"][0][1]
    assert seen["delegates"][0]["compile_specs"] == [[k, v.decode()] for k, v in specs]
    ref = ref_aot("add", "ethos-u85-128").resolve()
    (tosa,) = (ref / "inter").glob("output_tag0_*.tosa")
    assert (ref / "ours_" / tosa.name).read_bytes() == tosa.read_bytes()


@pytest.mark.compat
def test_aot_pte_bytes_equal_executorch(ref_aot, tmp_path):
    """The seed's aot_arm_compiler command writes ExecuTorch's .pte, byte for byte."""
    ours, theirs = _aot_ours_and_executorchs(ref_aot, tmp_path)
    assert ours == theirs


@pytest.mark.compat
def test_executorch_aot_pte_runs_here(ref_aot):
    """ExecuTorch's aot output (cortex_m Q/DQ + Ethos-U delegate) runs in our runtime."""
    import sys
    sys.path.insert(0, str(HERE))
    from ethosu_models import add

    model, (x, y) = add()
    ref = ref_aot("add", "ethos-u85-128")
    out = Runtime.get().load_program(ref / "aot_models_arm_delegate_ethos-u85-128.pte") \
        .load_method("forward").execute([x.numpy(), y.numpy()])
    assert np.abs(out[0] - (x + y).numpy()).max() < 0.05  # int8 quantization of x + y


@pytest.mark.compat
def test_executorch_aot_partial_runs_here(ref_aot):
    """Ethos-U delegates and Cortex-M CPU operators in one program: ExecuTorch's aot output for
    a model U55 takes only in part (its gt/where stays on the CPU between ``cortex_m::``
    quantize/dequantize) runs end to end here -- two delegates simulated, the CPU part on
    the Cortex-M kernels and portable ones."""
    import sys
    sys.path.insert(0, str(HERE))
    from ethosu_models import partial

    model, (x,) = partial()
    ref = ref_aot("partial", "ethos-u55-128")
    program = Runtime.get().load_program(ref / "aot_models_arm_delegate_ethos-u55-128.pte")
    plan = program.program.execution_plan[0]
    ops = {op.name for op in plan.operators}
    assert {"cortex_m::quantize_per_tensor", "cortex_m::dequantize_per_tensor"} <= ops
    assert len(plan.delegates) == 2
    (out,) = program.load_method("forward").execute([x.numpy()])
    with torch.no_grad():
        want = model(x).numpy()
    assert np.abs(out - want).max() < 0.1 * np.abs(want).max()  # int8 through three layers


def test_arm_run_add(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["arm", "run", *shlex.split(SEED_RUN.replace("mv2", "add"))]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "add_u85" / "add_arm_delegate_ethos-u85-128.pte").exists()
    assert (tmp_path / "add_u85" / "delegation_info.txt").exists()
    for text in ("Outputs (edgetorch runtime", "Vela estimates:", "Delegation summary:",
                 "quantization steps max"):
        assert text in out, text


@pytest.mark.slow
def test_arm_run_mv2_seed(tmp_path, monkeypatch, capsys):
    """The learning path's command, verbatim but for `./examples/arm/run.sh` -> `edgetorch arm
    run`. MobileNetV2's integer pipeline drifts from the fake-quant model (rescale rounding over
    ~50 layers): a few steps on average, around ten at most."""
    monkeypatch.chdir(tmp_path)
    assert cli_main(["arm", "run", *shlex.split(SEED_RUN)]) == 0
    out = capsys.readouterr().out
    pte = tmp_path / "mv2_u85" / "mv2_arm_delegate_ethos-u85-128.pte"
    assert pte.exists() and "Vela estimates:" in out
    assert "Delegated partitions for silicon acceleration: 1" in out
    line = next(s for s in out.splitlines() if "quantization steps max" in s)
    print(line)
    steps_max = int(line.split(", ")[-1].split(" quantization")[0])
    assert steps_max <= 20


@pytest.mark.slow
@pytest.mark.compat
def test_executorch_mv2_seed_pte_runs_here(ref_aot, monkeypatch):
    """ExecuTorch's own aot_arm_compiler output for MobileNetV2 on U85-128 (the seed's model and
    target) runs in our runtime: same top-5 as the float model, and vela_estimates equals the
    CSV Vela wrote in ExecuTorch's intermediates folder."""
    import csv

    import torch

    from edgetorch.backends.arm.ethosu import vela_estimates

    monkeypatch.setenv("EDGETORCH_AOT_MODEL", "mv2")
    ref = ref_aot("mv2", "ethos-u85-128")
    import importlib
    import sys
    sys.path.insert(0, str(HERE))
    import aot_models
    importlib.reload(aot_models)
    model, (x,) = aot_models.ModelUnderTest, aot_models.ModelInputs
    pte = ref / "aot_models_arm_delegate_ethos-u85-128.pte"
    got = Runtime.get().load_program(pte).load_method("forward").execute([x.numpy()])[0]
    with torch.no_grad():
        want = model(x).numpy()
    assert list(np.argsort(-got[0])[:5]) == list(np.argsort(-want[0])[:5])
    (est,) = vela_estimates(pte)
    (path,) = (ref / "inter" / "output").glob("out_summary_*.csv")
    row = next(csv.DictReader(open(path)))
    assert est["cycles_total"] == float(row["cycles_total"])
    assert est["sram_memory_used"] == float(row["sram_memory_used"])
    assert est["npu_operators"] > 50 and est["cpu_operators"] == 0


@pytest.mark.slow
@pytest.mark.compat
def test_aot_mv2_matches_executorch(ref_aot, tmp_path):
    """The seed's model and target through both aot_arm_compilers: the MobileNetV2 .tosa is
    byte-identical, and so are the delegate blob, compile specs, operators and instructions."""
    ours, theirs = _aot_ours_and_executorchs(ref_aot, tmp_path, "mv2")
    ref = ref_aot("mv2", "ethos-u85-128").resolve()
    (tosa,) = (ref / "inter").glob("output_tag0_*.tosa")
    assert (ref / "ours_" / tosa.name).read_bytes() == tosa.read_bytes()
    assert structure(ours) == structure(theirs)
