"""The VGF backend: compile spec, ``VgfPartitioner`` + ``VgfBackend`` (TOSA lowering, then the
ML SDK model converter, as ExecuTorch runs it), and the runtime's TOSA simulation of a VGF
delegate; against ExecuTorch 1.5.1 with the same converter: the same ``.pte``, and
ExecuTorch's ``.pte`` runs here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from arm_models import mv2
from ethosu_models import MODELS
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from edgetorch.backends.arm.quantizer import VgfQuantizer, get_symmetric_quantization_config
from edgetorch.backends.arm.runtime.tosa_sim import run_tosa
from edgetorch.backends.arm.runtime.vgf import SIMULATION_ENV_VAR, simulation
from edgetorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from edgetorch.errors import BackendNotFoundError, InvalidArgumentError, UnsafeFileError
from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from edgetorch.runtime import Runtime

INT = "TOSA-1.0+INT"


def test_compile_spec_as_executorch_writes_it():
    spec = VgfCompileSpec()
    assert str(spec.tosa_spec) == "TOSA-1.0+FP+INT+int4+int16"
    stored = [(s.key, s.value) for s in VgfCompileSpec(INT, ["--foo"])._to_list()]
    assert stored == [("tosa_spec", b"TOSA-1.0+INT"), ("compile_flags", b"--foo"),
                      ("output_format", b"vgf"), ("preserve_io_quantization", b"False"),
                      ("tosa_sw_dev_mode", b"True")]
    assert VgfCompileSpec._from_list(VgfCompileSpec(INT)._to_list()) == VgfCompileSpec(INT)
    with pytest.raises(ValueError, match="TOSA version"):
        VgfCompileSpec("TOSA-0.80+INT")


def compile_vgf(model_name: str, spec_name: str, inter=None):
    model, inputs = {**MODELS, "mv2": mv2}[model_name]()
    spec = VgfCompileSpec(spec_name)
    if inter is not None:
        spec.dump_intermediate_artifacts_to(str(inter))
    exported = torch.export.export(model, inputs)
    quantized = None
    if "INT" in spec_name:
        quantizer = VgfQuantizer(spec)
        quantizer.set_global(get_symmetric_quantization_config())
        prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
        prepared(*inputs)
        quantized = convert_pt2e(prepared)
        exported = torch.export.export(quantized, inputs)
    edge = to_edge_transform_and_lower(exported, partitioner=[VgfPartitioner(spec)])
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    return program.buffer, quantized, inputs


def test_vgf_delegate_runs_from_its_tosa(converter, tmp_path, monkeypatch):
    monkeypatch.setenv(SIMULATION_ENV_VAR, "tosa")  # the scenario-runner needs no TOSA graph
    pte, quantized, inputs = compile_vgf("convnet", INT, tmp_path / "inter")
    program = Runtime.get().load_program(pte)
    (delegate,) = program.program.execution_plan[0].delegates
    assert delegate.id == "VgfBackend"
    (vgf,) = (tmp_path / "inter").glob("output_*.tosa.vgf")
    (tosa,) = (tmp_path / "inter").glob("output_*_TOSA-1.0+INT.tosa")
    (got,) = program.load_method("forward").execute([x.numpy() for x in inputs])
    with torch.no_grad():
        want = quantized(*inputs).numpy()
    scale = 1 / 256  # well above the output's quantization step
    assert np.abs(np.asarray(got) - want).max() < scale
    # a new process: the graph is found next to the converter's copy of the blob
    from edgetorch.backends.arm.vgf.compiled import COMPILED

    saved = dict(COMPILED)
    COMPILED.clear()
    try:
        options = {"VgfBackend": {"intermediates": str(tmp_path / "inter")}}
        fresh = Runtime.get().load_program(pte, backend_options=options)
        (again,) = fresh.load_method("forward").execute([x.numpy() for x in inputs])
        np.testing.assert_array_equal(again, got)
        with pytest.raises(UnsafeFileError, match="outside the folders"):
            Runtime.get().load_program(pte).load_method("forward")  # the stored path: no
        bare, _, _ = compile_vgf("convnet", INT)  # no intermediates at all
        COMPILED.clear()
        with pytest.raises(BackendNotFoundError, match="not in the .pte"):
            Runtime.get().load_program(bare).load_method("forward")
        with pytest.raises(InvalidArgumentError, match="scenario-runner"):
            Runtime.get().load_program(pte, backend_options={"VgfBackend": {
                "simulation": "fvp"}}).load_method("forward")
    finally:
        COMPILED.update(saved)
    assert vgf.read_bytes()[:4] == b"VGF1" and run_tosa  # the files the runtime used exist
    assert tosa.stat().st_size > 0


@pytest.mark.compat
@pytest.mark.parametrize("model", [pytest.param("add", marks=pytest.mark.slow), "convnet"])
def test_pte_equals_executorch(converter, ref_vgf, tmp_path, monkeypatch, model):
    """Same model, same converter: ExecuTorch's .pte and ours are the same bytes (the stored
    intermediates path is a same-length sibling), and ExecuTorch's runs here."""
    monkeypatch.setenv(SIMULATION_ENV_VAR, "tosa")  # test_scenario_runner runs the device path
    ref = ref_vgf(model, INT)
    ours_inter = ref.parent / ("our" + ref.name[3:]) / "inter"
    pte, _, inputs = compile_vgf(model, INT, ours_inter)
    ours = pte.replace(str(ours_inter).encode(), str(ref / "inter").encode())
    assert ours == (ref / "model.pte").read_bytes()
    theirs = Runtime.get().load_program(str(ref / "model.pte")).load_method("forward")
    mine = Runtime.get().load_program(pte).load_method("forward")
    feeds = [x.numpy() for x in inputs]
    np.testing.assert_array_equal(theirs.execute(feeds)[0], mine.execute(feeds)[0])


def test_arm_run_vgf(converter, tmp_path, monkeypatch, capsys):
    """``edgetorch arm run`` / ``aot_arm_compiler --target=vgf``: ExecuTorch's file name, the
    delegate simulated here, compared with the quantized eager model."""
    from edgetorch.cli import main as cli_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SIMULATION_ENV_VAR, "tosa")
    assert cli_main(["arm", "run", "--aot_arm_compiler_flags=--delegate --quantize",
                     "--target=vgf", "--model_name=add", "--output=out"]) == 0
    text = capsys.readouterr().out
    assert (tmp_path / "out" / "add_arm_delegate_vgf.pte").exists()
    assert "VGF simulated from TOSA" in text and "quantization steps max" in text


@pytest.mark.parametrize("model", [
    "convnet", pytest.param("mv2", marks=pytest.mark.slow)])
def test_scenario_runner(converter, ml_sdk, tmp_path, model):
    """The .vgf itself on Arm's ML SDK (scenario-runner, ML emulation layer, lavapipe):
    bit-exact with tosa-tools' reference model running the TOSA graph it was converted from
    (simulation='compare' raises on any difference), and within a step of the quantized model."""
    pte, quantized, inputs = compile_vgf(model, INT, tmp_path / "inter")
    options = {"VgfBackend": {"simulation": "compare", "intermediates": str(tmp_path / "inter")}}
    method = Runtime.get().load_program(pte, backend_options=options).load_method("forward")
    (got,) = method.execute([x.numpy() for x in inputs])
    with torch.no_grad():
        want = quantized(*inputs).numpy()
    assert np.abs(np.asarray(got) - want).max() < 1 / 16
    assert simulation({}) == "scenario-runner"  # the default where the ML SDK is installed
    auto = Runtime.get().load_program(pte).load_method("forward")  # no TOSA graph needed
    np.testing.assert_array_equal(auto.execute([x.numpy() for x in inputs])[0], got)
