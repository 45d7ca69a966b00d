"""ExecuTorch's own Ethos-U .pte files (+ their intermediates) run in edgetorch's runtime.

The delegate is simulated from its TOSA graph with tosa-tools' reference model; outputs must
equal the reference model run directly on the same TOSA, and the quantized eager model within
2 quantization steps.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from ethosu_util import load_npz, output_scales, steps_off

import edgetorch.backends.arm.runtime.ethosu as sim
from edgetorch.errors import BackendNotFoundError, UnsafeFileError
from edgetorch.runtime import Runtime

pytestmark = pytest.mark.compat
CASES = [("add", "ethos-u55-128"), ("add", "ethos-u85-256"),
         ("convnet", "ethos-u55-128"), ("convnet", "ethos-u85-256")]


def _run(pte, inputs, **kw):
    method = Runtime.get().load_program(pte, **kw).load_method("forward")
    return method.execute(inputs)


@pytest.mark.parametrize("model,target", CASES)
def test_executorch_pte_runs(ref_arm, model, target):
    out = ref_arm(model, target)
    inputs, qeager = load_npz(out / "inputs.npz"), load_npz(out / "qeager.npz")
    ours = _run(out / "model.pte", inputs)
    (scale,) = output_scales((out / "model.pte").read_bytes())
    assert ours[0].shape == qeager[0].shape and ours[0].dtype == np.float32
    assert steps_off(ours[0], qeager[0], scale) <= 2


def test_simulation_equals_reference_model(ref_arm):
    """The delegate's int8 output is exactly what tosa_reference_model gives on its TOSA."""
    import tosa_reference_model as trm

    out = ref_arm("add", "ethos-u55-128")
    x, y = load_npz(out / "inputs.npz")
    (tosa,) = (out / "inter").glob("output_tag0_*.tosa")
    prog = Runtime.get().load_program(out / "model.pte")
    plan = prog.program.execution_plan[0]
    qparams = [(plan.values[c.instr_args.args[1]].val.double_val,
                plan.values[c.instr_args.args[2]].val.int_val)
               for c in plan.chains[0].instructions
               if hasattr(c.instr_args, "op_index")
               and plan.operators[c.instr_args.op_index].name.endswith("quantize_per_tensor")
               and not plan.operators[c.instr_args.op_index].name.endswith("dequantize_per_tensor")]
    q = [np.clip(np.round(v / s) + z, -128, 127).astype(np.int8)
         for v, (s, z) in zip((x, y), qparams, strict=True)]
    ref, status = trm.run(tosa.read_bytes(), q, verbosity="NONE")
    assert status == trm.GraphStatus.TOSA_VALID
    handle = sim.EthosUSimulator().init(
        memoryview(bytes(prog._pte.delegate_bytes(plan.delegates[0]))),
        {c.key: bytes(c.value) for c in plan.delegates[0].compile_specs},
        type("Ctx", (), {"named_data": None, "options": {"intermediates": str(out / "inter")}})())
    got = np.zeros((1, 3, 8, 8), np.int8)
    vals = [q[0], q[1], got]
    sim.EthosUSimulator().execute(handle, vals, [0, 1, 2])
    np.testing.assert_array_equal(got, ref[0])


def test_intermediates_from_backend_options(ref_arm, tmp_path, monkeypatch, fresh_process):
    out = ref_arm("convnet", "ethos-u55-128")
    moved = tmp_path / "elsewhere"
    shutil.copytree(out / "inter", moved)
    # point debug_artifact_path at a folder that does not exist (same length: the flatbuffer
    # stays valid)
    raw = (out / "model.pte").read_bytes()
    plan = Runtime.get().load_program(raw).program.execution_plan[0]
    old = next(bytes(c.value) for c in plan.delegates[0].compile_specs
               if c.key == "debug_artifact_path")
    pte = raw.replace(old, old[:-4] + b"XYZ/")
    assert pte != raw and len(pte) == len(raw)
    inputs = load_npz(out / "inputs.npz")
    # loaded from bytes, no folder is allowed: the stored path is not followed at all
    with pytest.raises(UnsafeFileError, match="debug_artifact_path.*allowed_dirs"):
        _run(pte, inputs, backend_options={"EthosUBackend": {"simulation": "tosa"}})
    moved_pte = tmp_path / "model.pte"
    moved_pte.write_bytes(pte)  # the stored folder lies outside the .pte's own folder
    with pytest.raises(UnsafeFileError, match="debug_artifact_path"):
        _run(moved_pte, inputs)
    with pytest.raises(BackendNotFoundError, match="dump_intermediate_artifacts_to"):
        _run(pte, inputs, backend_options={"EthosUBackend": {
            "simulation": "tosa", "allowed_dirs": [str(out)]}})
    expected = _run(out / "model.pte", inputs)
    # without its TOSA graph the delegate runs its command stream (npu/), to the same bits
    np.testing.assert_array_equal(
        _run(pte, inputs, backend_options={"EthosUBackend": {"simulation": "npu"}})[0],
        expected[0])
    got = _run(pte, inputs, backend_options={"EthosUBackend": {"intermediates": str(moved)}})
    np.testing.assert_array_equal(got[0], expected[0])
    monkeypatch.setenv(sim.ENV_VAR, str(moved))
    np.testing.assert_array_equal(_run(pte, inputs)[0], expected[0])


def test_external_weights_pte_runs(ref_arm):
    out = ref_arm("convnet", "ethos-u85-256", "weight_data=npu_weights")
    inputs, qeager = load_npz(out / "inputs.npz"), load_npz(out / "qeager.npz")
    ours = _run(out / "model.pte", inputs, data_path=out / "npu_weights.ptd")
    (scale,) = output_scales((out / "model.pte").read_bytes())
    assert steps_off(ours[0], qeager[0], scale) <= 2
