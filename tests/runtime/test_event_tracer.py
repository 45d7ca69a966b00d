"""The event tracer and error context, on programs written by ExecuTorch 1.5.1 (no torch).

The event stream is ExecuTorch's (facts/devtools.md): a "Default" block with Method::init and
Program::load_method, then per execute an "Execute" block where each kernel instruction logs
its outputs, native_call_<op>.<overload> and OPERATOR_CALL, a delegate logs its own events,
its arguments and DELEGATE_CALL, and Method::execute closes the run before the outputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary
from edgetorch.errors import EdgeTorchError, InvalidArgumentError, KernelError
from edgetorch.kernels import registry
from edgetorch.runtime import RecordingEventTracer, Runtime
from edgetorch.runtime.event_tracer import DebugEvent, ProfileEvent
from edgetorch.schema.pte import PteFile

FIXTURES = Path(__file__).parents[1] / "fixtures"
ET_TINY = FIXTURES / "et_tiny_classifier.pte"
ET_XNN = Path(__file__).parents[1] / "backends/xnnpack/fixtures/et_tiny_classifier_xnnpack.pte"


def _input(npz: Path) -> np.ndarray:
    return np.load(npz)["input_0"]


def _x() -> np.ndarray:
    return _input(FIXTURES / "et_tiny_classifier.io.npz")


def _kernel_names(path: Path) -> list[str]:
    plan = PteFile.parse(path.read_bytes()).program.execution_plan[0]
    names = []
    for ins in plan.chains[0].instructions:
        op = plan.operators[ins.instr_args.op_index]
        names.append(f"{op.name}.{op.overload}" if op.overload else op.name)
    return names


def _profile(events) -> list[tuple[str | None, int, int]]:
    return [(e.name, e.chain_index, e.instruction_id) for e in events if isinstance(e, ProfileEvent)]


def test_no_tracer_by_default():
    program = Runtime.get().load_program(ET_TINY)
    assert program.event_tracer is None
    method = program.load_method("forward")
    assert method.event_tracer is None
    method.execute([_x()])


def test_event_stream_per_instruction_as_executorch_records_it():
    program = Runtime.get().load_program(ET_TINY, enable_etdump=True)
    tracer = program.event_tracer
    assert isinstance(tracer, RecordingEventTracer) and not tracer.log_intermediate_outputs
    method = program.load_method("forward")
    method.execute([_x()])
    method.execute([_x()])
    assert [b.name for b in tracer.run_blocks] == ["Default", "Execute", "Execute"]
    assert _profile(tracer.run_blocks[0].events) == [
        ("Method::init", -1, 0), ("Program::load_method", -1, 0)]
    want = []
    for i, op in enumerate(_kernel_names(ET_TINY)):
        want += [(f"native_call_{op.partition('::')[2]}", 0, i), ("OPERATOR_CALL", 0, i)]
    want.append(("Method::execute", -1, 0))
    for block in tracer.run_blocks[1:]:
        assert _profile(block.events) == want
        # Without a debug buffer there are profile events only (ExecuTorch's N=0 behaviour).
        assert all(isinstance(e, ProfileEvent) for e in block.events)
        for e in block.events:
            assert 0 <= e.start_time <= e.end_time
    # Each instruction's record is what the events were built from.
    assert [r.name for r in method.records] == _kernel_names(ET_TINY)
    assert [r.kind for r in method.records] == ["kernel"] * len(method.records)


def test_debug_events_carry_each_kernel_output_and_the_program_outputs():
    program = Runtime.get().load_program(ET_TINY, enable_etdump=True, debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    x = _x()
    out = method.execute([x])[0]
    events = program.event_tracer.run_blocks[-1].events
    debug = [e for e in events if isinstance(e, DebugEvent)]
    # One value per kernel output, logged before its native_call event, then the output.
    kernels = [r for r in method.records if r.kind == "kernel"]
    assert [d.instruction_id for d in debug[:-1]] == [r.index for r in kernels]
    for d in debug[:-1]:
        i = events.index(d)
        assert events[i + 1].name.startswith("native_call_") and events[i + 1].instruction_id == d.instruction_id
    last = debug[-1]
    assert last.output and last.chain_index == -1 and last.instruction_id == 0
    np.testing.assert_array_equal(last.value, out)
    np.testing.assert_array_equal(debug[-2].value, out)  # the last kernel computes the output
    # The first instruction's output is an intermediate: it equals recomputing it from the
    # instruction's own argument values (a copy taken at the time, not the reused arena).
    first = kernels[0]
    assert debug[0].value.shape == method._vals[first.outputs[0]].shape
    assert debug[0].value is not method._vals[first.outputs[0]]


def test_debug_buffer_too_small_drops_values_and_says_so():
    program = Runtime.get().load_program(ET_TINY, enable_etdump=True, debug_buffer_size=64)
    program.load_method("forward").execute([_x()])
    tracer = program.event_tracer
    assert tracer.debug_buffer_overflowed
    assert tracer.debug_buffer_used <= 64
    tracer.reset()
    assert tracer.run_blocks == [] and tracer.debug_buffer_used == 0
    assert not tracer.debug_buffer_overflowed


def test_xnnpack_reports_one_event_per_node_with_its_debug_handle():
    program = Runtime.get().load_program(ET_XNN, enable_etdump=True, debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    method.execute([_input(ET_XNN.with_name("et_tiny_classifier_xnnpack.io.npz"))])
    pte = PteFile.parse(ET_XNN.read_bytes())
    plan = pte.program.execution_plan[0]
    handles = [n.debug_handle for n in
               deserialize_xnnpack_binary(pte.delegate_bytes(plan.delegates[0])).graph.xnodes]
    events = program.event_tracer.run_blocks[-1].events
    delegate_call = next(e for e in events if e.name == "DELEGATE_CALL")
    inner = [e for e in events if isinstance(e, ProfileEvent) and e.delegate_debug_id_str]
    assert [e.debug_handle for e in inner] == handles
    assert all(e.instruction_id == delegate_call.instruction_id and e.chain_index == 0
               for e in inner)
    assert events.index(inner[-1]) < events.index(delegate_call)
    # Every DELEGATE_CALL argument (inputs and outputs) is logged, as ExecuTorch does.
    args = [e for e in events if isinstance(e, DebugEvent) and not e.output
            and e.instruction_id == delegate_call.instruction_id]
    call = plan.chains[0].instructions[delegate_call.instruction_id].instr_args
    assert len(args) == len(call.args)


def _failing_kernel(monkeypatch, op: str, exc: Exception) -> None:
    entry = registry.KERNELS[op]

    def boom(*args):
        raise exc

    monkeypatch.setitem(registry.KERNELS, op, registry.KernelEntry(op, boom, entry.num_args))


@pytest.mark.parametrize("traced", [False, True])
def test_a_typed_kernel_error_names_method_instruction_and_operator(monkeypatch, traced):
    names = _kernel_names(ET_TINY)
    op = names[1]
    _failing_kernel(monkeypatch, op, InvalidArgumentError("bad thing"))
    program = Runtime.get().load_program(ET_TINY, enable_etdump=traced)
    method = program.load_method("forward")
    with pytest.raises(InvalidArgumentError) as info:
        method.execute([_x()])
    msg = str(info.value)
    assert "method 'forward' instruction 1" in msg and op in msg and "bad thing" in msg
    assert info.value.code == InvalidArgumentError.code
    assert isinstance(info.value.__cause__, InvalidArgumentError)
    assert info.value.instruction == 1 and info.value.operator == op


def test_an_untyped_kernel_failure_becomes_a_kernel_error_with_context(monkeypatch):
    op = _kernel_names(ET_TINY)[0]
    _failing_kernel(monkeypatch, op, ZeroDivisionError("oops"))
    method = Runtime.get().load_program(ET_TINY).load_method("forward")
    with pytest.raises(KernelError, match=r"method 'forward' instruction 0 \(.*ZeroDivisionError: oops"):
        method.execute([_x()])


def test_a_delegate_error_names_the_delegate_instruction_and_the_node():
    method = Runtime.get().load_program(ET_XNN).load_method("forward")
    graph = method._delegate_handles[0][1]  # the XNNPACK runtime's compiled graph

    def boom():
        raise ValueError("broken node")

    graph.steps[1] = boom
    with pytest.raises(KernelError) as info:
        method.execute([_input(ET_XNN.with_name("et_tiny_classifier_xnnpack.io.npz"))])
    msg = str(info.value)
    assert "method 'forward' instruction 0 (delegate XnnpackBackend" in msg
    assert "XNNPACK node 1" in msg and "debug handle" in msg and "broken node" in msg
    assert isinstance(info.value, EdgeTorchError)


def test_an_internal_bug_while_loading_is_not_reported_as_a_malformed_file(monkeypatch):
    from edgetorch.errors import FormatError, InternalError, InvalidProgramError
    from edgetorch.runtime import method as method_module

    def bug(self):
        raise KeyError("oops")

    monkeypatch.setattr(method_module.Method, "_written_slots", bug)
    program = Runtime.get().load_program(ET_TINY)
    with pytest.raises(InternalError, match="bug in edgetorch") as info:
        program.load_method("forward")
    assert not isinstance(info.value, (FormatError, InvalidProgramError))
    assert isinstance(info.value.__cause__, KeyError)


def test_a_backend_refusing_its_blob_is_an_invalid_program(monkeypatch):
    from edgetorch.errors import ErrorCode, InvalidProgramError
    from edgetorch.runtime.backends import RUNTIME_BACKENDS

    def refuse(blob, specs, context):
        raise ValueError("unknown blob layout")

    monkeypatch.setattr(RUNTIME_BACKENDS["XnnpackBackend"], "init", refuse)
    with pytest.raises(InvalidProgramError, match="unknown blob layout") as info:
        Runtime.get().load_program(ET_XNN).load_method("forward")
    assert info.value.code == ErrorCode.DelegateInvalidCompatibility
