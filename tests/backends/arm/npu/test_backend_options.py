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


def test_u85_stream_is_refused_with_a_typed_error():
    from edgetorch.backends.arm.runtime.npu.cmdstream import parse_driver_payload
    from edgetorch.backends.arm.runtime.npu.simulator import accelerator_of

    words = np.array([0x31504F43, 0x00100001, 0x20000008, 0, 0x00010002, 0xFFFF0000], "<u4")
    payload = parse_driver_payload(words.tobytes())
    with pytest.raises(OperatorMissingError, match="Ethos-U85"):
        accelerator_of(payload)


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
def test_u85_pte_without_tosa_names_both_ways(ref_arm):
    """An Ethos-U85 delegate whose TOSA graph is gone: neither simulation can run it, and the
    error says why for each."""
    from ethosu_util import load_npz

    from edgetorch.errors import BackendNotFoundError
    from edgetorch.runtime import Runtime

    out = ref_arm("add", "ethos-u85-256")
    raw = (out / "model.pte").read_bytes()
    plan = Runtime.get().load_program(raw).program.execution_plan[0]
    old = next(bytes(c.value) for c in plan.delegates[0].compile_specs
               if c.key == "debug_artifact_path")
    pte = raw.replace(old, old[:-4] + b"XYZ/")  # same length: the flatbuffer stays valid
    with pytest.raises(BackendNotFoundError, match="cannot run it either.*Ethos-U85"):
        run_pte(pte, load_npz(out / "inputs.npz"), "auto")
