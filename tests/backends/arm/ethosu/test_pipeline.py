"""The Ethos-U flow end to end on edgetorch's compiler and runtime, checked against
ExecuTorch 1.5.1: the seed snippet, byte-identical .pte files, ExecuTorch loading ours, the
simulation vs the quantized eager model, Vela's estimates for every partition."""

from __future__ import annotations

import csv
import logging
import shutil

import numpy as np
import pytest
import torch
from ethosu_models import MODELS
from ethosu_util import output_scales, steps_off, structure
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import edgetorch.backends.arm.tosa.backend as tosa_backend
from conftest import ref_check
from edgetorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner, vela_estimates
from edgetorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile

SINGLE = [("add", "ethos-u55-128"), ("add", "ethos-u85-256"),
          ("convnet", "ethos-u55-128"), ("convnet", "ethos-u85-256")]


def compile_model(name, target, intermediates=None, **spec_kwargs):
    """The Python API flow of ExecuTorch's Ethos-U docs; returns (edge, et, qmodel, inputs)."""
    model, inputs = MODELS[name]()
    cs = EthosUCompileSpec(target, **spec_kwargs)
    if intermediates is not None:
        cs.dump_intermediate_artifacts_to(intermediates)
    q = EthosUQuantizer(cs)
    q.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), q)
    prepared(*inputs)
    qmodel = convert_pt2e(prepared)
    edge = to_edge_transform_and_lower(torch.export.export(qmodel, inputs),
                                       partitioner=[EthosUPartitioner(cs)])
    et = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    return edge, et, qmodel, inputs


def _run(pte, inputs, **kw):
    method = Runtime.get().load_program(pte, **kw).load_method("forward")
    return method.execute([np.asarray(t) for t in inputs])


def test_seed_minimal_example(tmp_path, monkeypatch):
    """FEATURES.md §10 with the imports renamed (model: the small conv net)."""
    monkeypatch.chdir(tmp_path)
    model, example_inputs = MODELS["convnet"]()
    graph_module = torch.export.export(model, example_inputs).module()
    # -- the seed, imports renamed --
    from edgetorch.backends.arm.ethosu import EthosUCompileSpec
    from edgetorch.backends.arm.quantizer import (
        EthosUQuantizer,
        get_symmetric_quantization_config,
    )
    compile_spec = EthosUCompileSpec(target="ethos-u55-128",
                                     system_config="Ethos_U55_High_End_Embedded",
                                     memory_mode="Shared_Sram",
                                     extra_flags=["--output-format=raw", "--debug-force-regor"])
    quantizer = EthosUQuantizer(compile_spec)
    operator_config = get_symmetric_quantization_config()
    quantizer.set_global(operator_config)
    quantized_graph_module = prepare_pt2e(graph_module, quantizer)
    quantized_graph_module(*example_inputs)
    quantized_graph_module = convert_pt2e(quantized_graph_module)
    quantized_exported_program = torch.export.export(quantized_graph_module, example_inputs)
    from edgetorch.backends.arm.ethosu import EthosUPartitioner
    partitioner = EthosUPartitioner(compile_spec)
    from edgetorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from edgetorch.extension.export_util.utils import save_pte_program
    edge_program_manager = to_edge_transform_and_lower(
        quantized_exported_program, partitioner=[partitioner],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))
    executorch_program_manager = edge_program_manager.to_executorch(
        config=ExecutorchBackendConfig(extract_delegate_segments=False))
    save_pte_program(executorch_program_manager, "ethos_u_minimal_example.pte")
    # -- checks: one delegate, it runs (same process: no intermediates needed) --
    pte = tmp_path / "ethos_u_minimal_example.pte"
    plan = Runtime.get().load_program(pte).program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["EthosUBackend"]
    got = _run(pte, example_inputs)
    with torch.no_grad():
        want = quantized_graph_module(*example_inputs)
    (scale,) = output_scales(pte.read_bytes())
    assert steps_off(got[0], want.numpy(), scale) <= 2


def _ours_as_executorch(ref, model, target):
    ours_dir = str(ref / "ours_") + "/"
    shutil.rmtree(ours_dir, ignore_errors=True)
    _, et, _, _ = compile_model(model, target, ours_dir)
    return et.buffer.replace(ours_dir.encode(), (str(ref / "inter") + "/").encode())


@pytest.mark.compat
@pytest.mark.parametrize("model,target", SINGLE)
def test_pte_matches_executorch_given_its_tosa(ref_arm, monkeypatch, model, target):
    """Same model, seed and TOSA as ExecuTorch: the same delegate (blob bytes, compile specs in
    order), operators, instructions and constants. The intermediates path is stored in the
    .pte, so ours is a same-length sibling of ExecuTorch's, swapped back."""
    ref = ref_arm(model, target).resolve()
    (et_tosa,) = (ref / "inter").glob("output_tag0_*.tosa")
    monkeypatch.setattr(tosa_backend, "tosa_flatbuffer", lambda ep, cs: et_tosa.read_bytes())
    ours = _ours_as_executorch(ref, model, target)
    assert structure(ours) == structure((ref / "model.pte").read_bytes())


@pytest.mark.compat
@pytest.mark.parametrize("model,target", SINGLE)
def test_pte_bytes_equal_executorch_given_its_tosa(ref_arm, monkeypatch, model, target):
    """Given ExecuTorch's TOSA, our whole .pte is ExecuTorch's, byte for byte (a fresh EValue
    per constant argument, ExecuTorch's greedy plan over the specs in its order)."""
    ref = ref_arm(model, target).resolve()
    (et_tosa,) = (ref / "inter").glob("output_tag0_*.tosa")
    monkeypatch.setattr(tosa_backend, "tosa_flatbuffer", lambda ep, cs: et_tosa.read_bytes())
    assert _ours_as_executorch(ref, model, target) == \
        (ref / "model.pte").read_bytes()


@pytest.mark.compat
@pytest.mark.parametrize("model,target", SINGLE)
def test_tosa_and_pte_match_executorch(ref_arm, model, target):
    """Our own TOSA lowering: the .tosa equals ExecuTorch's, and so does the program."""
    ref = ref_arm(model, target).resolve()
    ours = _ours_as_executorch(ref, model, target)
    (et_tosa,) = (ref / "inter").glob("output_tag0_*.tosa")
    assert (ref / "ours_" / et_tosa.name).read_bytes() == et_tosa.read_bytes()
    assert structure(ours) == structure((ref / "model.pte").read_bytes())


@pytest.mark.compat
@pytest.mark.parametrize("model,target", [("convnet", "ethos-u55-128"),
                                          ("partial", "ethos-u55-128")])
def test_executorch_loads_ours_and_we_run_it(tmp_path, model, target, fresh_process):
    inter = str(tmp_path / "inter") + "/"
    edge, et, qmodel, inputs = compile_model(model, target, inter)
    pte = tmp_path / "model.pte"
    pte.write_bytes(et.buffer)
    from edgetorch.backends.arm.ethosu.compiled import COMPILED

    COMPILED.clear()  # as in a new process: the TOSA comes from the intermediates folder
    seen = ref_check(pte)
    ours = Runtime.get().load_program(pte).program.execution_plan[0]
    assert seen["methods"] == ["forward"] and seen["num_inputs"] == len(inputs)
    assert [d["id"] for d in seen["delegates"]] == [d.id for d in ours.delegates]
    assert seen["delegates"][0]["compile_specs"] == [
        [c.key, bytes(c.value).decode()] for c in ours.delegates[0].compile_specs]
    # our runtime, simulation from the intermediates folder the .pte names (a fresh process
    # would have nothing else): within 2 steps of the quantized eager model
    got = _run(pte.read_bytes(), inputs,
               backend_options={"EthosUBackend": {"intermediates": inter}})
    with torch.no_grad():
        want = qmodel(*inputs)
    scales = output_scales(pte.read_bytes())
    assert steps_off(got[0], want.numpy(), scales[-1]) <= 2


@pytest.mark.compat
def test_partial_u55_estimates_every_partition(tmp_path, caplog):
    inter = str(tmp_path / "inter") + "/"
    with caplog.at_level(logging.INFO, logger="edgetorch.backends.arm.tosa.partitioner"):
        edge, et, _, _ = compile_model("partial", "ethos-u55-128", inter)
    estimates = vela_estimates(edge, per_layer=True)
    assert len(estimates) == 2 and {e["tag"] for e in estimates} == {"tag0", "tag1"}
    assert all(e["cycles_total"] > 0 and e["per_layer"] for e in estimates)
    # Vela's CSV in the folder is the last partition compiled; one of ours equals it
    (path,) = (tmp_path / "inter" / "output").glob("out_summary_*.csv")
    row = next(csv.DictReader(open(path)))
    assert any(all(float(e[k]) == float(v) for k, v in row.items()
                   if k in ("cycles_total", "cycles_npu", "sram_memory_used", "nn_macs"))
               for e in estimates)
    assert "where" in caplog.text or "gt" in caplog.text
    # the .pte file gives the same numbers (Vela re-run on the .tosa files)
    pte = tmp_path / "m.pte"
    pte.write_bytes(et.buffer)
    again = vela_estimates(pte)
    assert sorted(e["cycles_total"] for e in again) == sorted(e["cycles_total"] for e in estimates)


def test_external_weights_roundtrip(tmp_path):
    from edgetorch.backends.arm.ethosu import VelaExternalBlockPlacements

    edge, et, qmodel, inputs = compile_model(
        "convnet", "ethos-u85-256",
        external_block_placements=VelaExternalBlockPlacements(weight_data="npu_weights"))
    et.write_tensor_data_to_file(tmp_path)
    assert (tmp_path / "npu_weights.ptd").exists()
    got = _run(et.buffer, inputs, data_path=tmp_path / "npu_weights.ptd")
    with torch.no_grad():
        want = qmodel(*inputs)
    assert steps_off(got[0], want.numpy(), output_scales(et.buffer)[-1]) <= 2



@pytest.mark.compat
def test_external_weights_ptd_equals_executorch(ref_arm, tmp_path, monkeypatch):
    """With ExecuTorch's TOSA, our npu_weights.ptd is byte for byte ExecuTorch's."""
    from edgetorch.backends.arm.ethosu import VelaExternalBlockPlacements

    ref = ref_arm("convnet", "ethos-u85-256", "weight_data=npu_weights").resolve()
    (et_tosa,) = (ref / "inter").glob("output_tag0_*.tosa")
    monkeypatch.setattr(tosa_backend, "tosa_flatbuffer", lambda ep, cs: et_tosa.read_bytes())
    _, et, _, _ = compile_model(
        "convnet", "ethos-u85-256",
        external_block_placements=VelaExternalBlockPlacements(weight_data="npu_weights"))
    et.write_tensor_data_to_file(tmp_path)
    assert (tmp_path / "npu_weights.ptd").read_bytes() == (ref / "npu_weights.ptd").read_bytes()
    plan = PteFile.parse(et.buffer).program.execution_plan[0]
    specs = {c.key: bytes(c.value) for c in plan.delegates[0].compile_specs}
    assert specs["external_block_placements"] == b'{"weight_data":"npu_weights"}'
