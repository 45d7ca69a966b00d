"""ETDump files written by our runtime (``Program.write_etdump_result_to_file``): the event
stream of ExecuTorch's runtime, values in a 64-byte-aligned debug buffer, read by our schema
reader and by ExecuTorch 1.5.1's own Inspector."""

from __future__ import annotations

import json

import numpy as np
import pytest
import ref_process
import torch
from torch.export import export

from edgetorch.errors import InvalidArgumentError
from edgetorch.exir import to_edge
from edgetorch.runtime import Runtime
from edgetorch.schema.etdump import ValueType, deserialize_from_etdump_flatcc
from edgetorch.schema.scalar_type import to_numpy_dtype


class ConvReluLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(144, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    torch.manual_seed(0)
    model, x = ConvReluLinear().eval(), torch.randn(1, 3, 8, 8)
    path = tmp_path_factory.mktemp("etdump") / "m.pte"
    path.write_bytes(to_edge(export(model, (x,))).to_executorch().buffer)
    return path, model, x


def _run(path, x, runs=2, debug=1 << 20):
    program = Runtime.get().load_program(str(path), enable_etdump=True, debug_buffer_size=debug)
    method = program.load_method("forward")
    outs = [method.execute([x])[0] for _ in range(runs)]
    return program, outs


def test_event_stream_and_values(pte, tmp_path):
    path, model, x = pte
    program, outs = _run(path, x)
    program.write_etdump_result_to_file(tmp_path / "a.etdp", tmp_path / "a.bin")
    data = (tmp_path / "a.etdp").read_bytes()
    assert data[8:12] == b"ED00" and int.from_bytes(data[:4], "little") == len(data) - 4
    buffer = (tmp_path / "a.bin").read_bytes()
    assert len(buffer) == 1 << 20  # the whole buffer, as ExecuTorch writes it
    etdump = deserialize_from_etdump_flatcc(data)
    assert [r.name for r in etdump.run_data] == ["Default", "Execute", "Execute"]
    default = [e.profile_event.name for e in etdump.run_data[0].events]
    assert default == ["Method::init", "Program::load_method"]
    execute = etdump.run_data[1].events
    names = [e.profile_event.name for e in execute if e.profile_event]
    assert names == ["native_call_convolution.out", "OPERATOR_CALL", "native_call_relu.out",
                     "OPERATOR_CALL", "native_call_addmm.out", "OPERATOR_CALL",
                     "Method::execute"]
    debug = [e.debug_event for e in execute if e.debug_event]
    # Each kernel's output, then the program output (unset chain id as an unsigned -1).
    assert [d.instruction_id for d in debug] == [0, 1, 2, 0]
    assert debug[-1].chain_index == (1 << 64) - 1 and debug[-1].debug_entry.output.bool_val
    with torch.no_grad():
        expected = [model.conv(x), torch.relu(model.conv(x)), model(x), model(x)]
    for d, want in zip(debug, expected):
        t = d.debug_entry.tensor
        assert d.debug_entry.val == ValueType.TENSOR and t.offset % 64 == 0
        dtype = to_numpy_dtype(t.scalar_type)
        got = np.frombuffer(buffer, dtype, int(np.prod(t.sizes)), t.offset).reshape(t.sizes)
        np.testing.assert_allclose(got, want.numpy(), atol=1e-5)
    np.testing.assert_allclose(outs[0], model(x).detach().numpy(), atol=1e-5)


def test_profile_only_without_a_debug_buffer(pte, tmp_path):
    path, _, x = pte
    program, _ = _run(path, x, runs=1, debug=0)
    program.write_etdump_result_to_file(tmp_path / "p.etdp")
    etdump = deserialize_from_etdump_flatcc((tmp_path / "p.etdp").read_bytes())
    assert not any(e.debug_event for r in etdump.run_data for e in r.events)
    with pytest.raises(InvalidArgumentError, match="debug_buffer_size"):
        program.write_etdump_result_to_file(tmp_path / "p2.etdp", tmp_path / "p2.bin")


def test_program_without_etdump_says_how_to_enable_it(pte, tmp_path):
    program = Runtime.get().load_program(str(pte[0]))
    with pytest.raises(InvalidArgumentError, match="enable_etdump=True"):
        program.write_etdump_result_to_file(tmp_path / "x.etdp")


_REF_INSPECT = """
import json, sys
from executorch.devtools import Inspector
ins = Inspector(etdump_path=sys.argv[1], debug_buffer_path=sys.argv[2])
rows = []
for block in ins.event_blocks:
    for ev in block.events:
        rows.append([block.name, ev.name, len(ev.perf_data.raw) if ev.perf_data else 0,
                     [list(getattr(d, "shape", [])) for d in (ev.debug_data or [])]])
print(json.dumps(rows))
"""


@pytest.mark.compat
def test_executorchs_inspector_reads_our_etdump(pte, tmp_path):
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    path, _, x = pte
    program, _ = _run(path, x, runs=3)
    program.write_etdump_result_to_file(tmp_path / "a.etdp", tmp_path / "a.bin")
    result = ref_process.run([str(ref_python()), "-c", _REF_INSPECT, str(tmp_path / "a.etdp"),
                             str(tmp_path / "a.bin")], env=_clean_env(), capture_output=True,
                             text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    by_name = {(block, name): (runs, shapes) for block, name, runs, shapes in rows}
    # Identical executes merge into one block with one timing per execute.
    assert by_name[("Execute", "native_call_convolution.out")] == (3, [[1, 4, 6, 6]])
    assert by_name[("Execute", "native_call_addmm.out")] == (3, [[1, 5]])
    assert ("Default", "Program::load_method") in by_name


def test_seed_snippet_etrecord_and_inspector_on_our_etdump(tmp_path, capsys):
    """FEATURES.md §10 snippet 7 end to end: ETRecord from the compiler, ETDump and debug
    buffer from our runtime, our Inspector joining them."""
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from edgetorch.devtools import Inspector
    from edgetorch.exir.program import to_edge_transform_and_lower

    torch.manual_seed(0)
    model, x = ConvReluLinear().eval(), torch.randn(1, 3, 8, 8)
    edge_manager = to_edge_transform_and_lower(export(model, (x,)),
                                               partitioner=[XnnpackPartitioner()],
                                               generate_etrecord=True)
    et_manager = edge_manager.to_executorch()
    etrecord = et_manager.get_etrecord()
    etrecord.update_representative_inputs([x])
    etrecord.save(str(tmp_path / "debug.etrecord"))
    (tmp_path / "m.pte").write_bytes(et_manager.buffer)
    program, _ = _run(tmp_path / "m.pte", x, runs=2)
    program.write_etdump_result_to_file(tmp_path / "m.etdp", tmp_path / "m.bin")
    inspector = Inspector(etdump_path=str(tmp_path / "m.etdp"),
                          etrecord=str(tmp_path / "debug.etrecord"),
                          debug_buffer_path=str(tmp_path / "m.bin"))
    inspector.print_data_tabular()
    printed = capsys.readouterr().out
    assert "DELEGATE_CALL" in printed and "XnnpackBackend" in printed
    frame = inspector.to_dataframe()
    delegate = frame[frame.event_name == "DELEGATE_CALL"].iloc[0]
    assert "aten.convolution.default" in delegate.op_types and len(delegate.raw) == 2
    gaps = inspector.calculate_numeric_gap("MSE")
    assert len(gaps) >= 1 and max(max(g) for g in gaps["gap"]) <= 1e-6
