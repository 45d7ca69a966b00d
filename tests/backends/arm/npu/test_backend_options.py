"""The runtime's choice between TOSA and command-stream simulation, and its typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu_models import MODELS
from npu_util import compile_pte, run_pte

from edgetorch.backends.arm.ethosu.vela_bin import parse_vela_bin, write_vela_bin
from edgetorch.backends.arm.runtime.npu.simulator import NpuProgram
from edgetorch.errors import InvalidArgumentError, InvalidProgramError, OperatorMissingError


@pytest.fixture(scope="module")
def add_pte():
    model, example = MODELS["add"]()
    return compile_pte(model, example, "ethos-u55-64"), example


def test_auto_prefers_tosa_then_command_stream(add_pte, monkeypatch):
    pte, example = add_pte
    x = [np.asarray(t) for t in example]
    # compiled in this process: the TOSA graph is known ...
    _, handles = run_pte(pte, x, "auto")
    assert handles[0].runner is not None and handles[0].npu is None
    # ... in a fresh process without intermediates, the command stream runs
    from edgetorch.backends.arm.ethosu.compiled import COMPILED

    for key in list(COMPILED):  # forget it, as a new process would (restored at teardown)
        monkeypatch.delitem(COMPILED, key)
    outs, handles = run_pte(pte, x, "auto")
    assert handles[0].runner is None and handles[0].npu.accelerator == "ethos-u55-64"
    assert "elementwise_add x1" in handles[0].report()
    monkeypatch.setenv("EDGETORCH_ETHOSU_SIMULATION", "npu")
    from edgetorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    np.testing.assert_array_equal(method.execute(x)[0], outs[0])


def test_bad_option_is_a_typed_error(add_pte):
    pte, example = add_pte
    with pytest.raises(InvalidArgumentError, match="simulation='gpu'"):
        run_pte(pte, [np.asarray(t) for t in example], "gpu")


def test_unknown_product_is_refused_with_a_typed_error():
    from edgetorch.backends.arm.runtime.npu.cmdstream import parse_driver_payload
    from edgetorch.backends.arm.runtime.npu.simulator import accelerator_of

    words = np.array([0x31504F43, 0x00100001, 0x20000008, 0, 0x00010002, 0xFFFF0000], "<u4")
    assert accelerator_of(parse_driver_payload(words.tobytes())) == "ethos-u85-256"
    words[2] = 0x30000008  # product 3: no such Ethos-U
    with pytest.raises(OperatorMissingError, match="product 3"):
        accelerator_of(parse_driver_payload(words.tobytes()))


def test_weights_out_of_range_and_wrong_inputs_are_typed_errors(add_pte):
    from edgetorch.runtime import Runtime

    pte, _ = add_pte
    prog = Runtime.get().load_program(pte)
    plan = prog.program.execution_plan[0]
    vela = parse_vela_bin(prog._pte.delegate_bytes(plan.delegates[0]))
    npu = NpuProgram.from_vela_bin(vela)
    with pytest.raises(InvalidArgumentError, match="expects 192 elements"):
        npu.run([np.zeros(10, np.int8), np.zeros(192, np.int8)])
    with pytest.raises(InvalidArgumentError, match="the delegate has 2"):
        npu.run([np.zeros(192, np.int8)])
    # a conv stream whose weight region is cut short
    model, example = MODELS["convnet"]()
    prog = Runtime.get().load_program(compile_pte(model, example, "ethos-u55-128"))
    plan = prog.program.execution_plan[0]
    vela = parse_vela_bin(prog._pte.delegate_bytes(plan.delegates[0]))
    blob, _ = write_vela_bin(vela.cmd_data, vela.weight_data[:8], vela.scratch_size,
                             vela.inputs, vela.outputs)
    short = NpuProgram.from_vela_bin(parse_vela_bin(blob))
    with pytest.raises(InvalidProgramError, match="region 0"):
        short.run([np.zeros(vela.inputs[0].numel, np.int8)])


@pytest.mark.compat
def test_u85_pte_without_tosa_runs_its_command_stream(ref_arm, monkeypatch):
    """An Ethos-U85 delegate whose TOSA graph is gone runs from its command stream, with the
    same outputs as the TOSA simulation of the intact file."""
    from ethosu_util import load_npz

    from edgetorch.backends.arm.runtime import ethosu
    from edgetorch.runtime import Runtime

    # blobs compiled earlier in this process (our identical .pte) would supply the TOSA
    monkeypatch.setattr(ethosu, "COMPILED", {})

    out = ref_arm("add", "ethos-u85-256")
    raw = (out / "model.pte").read_bytes()
    plan = Runtime.get().load_program(raw).program.execution_plan[0]
    old = next(bytes(c.value) for c in plan.delegates[0].compile_specs
               if c.key == "debug_artifact_path")
    pte = raw.replace(old, old[:-4] + b"XYZ/")  # same length: the flatbuffer stays valid
    # (loaded from bytes: the stored folder is followed only when the user allows it)
    outs, handles = run_pte(pte, load_npz(out / "inputs.npz"), "auto", allowed_dirs=[str(out)])
    assert handles[0].runner is None and handles[0].npu.accelerator == "ethos-u85-256"
    want, _ = run_pte(out / "model.pte", load_npz(out / "inputs.npz"), "tosa")
    for a, b in zip(outs, want, strict=True):
        np.testing.assert_array_equal(a, b)
