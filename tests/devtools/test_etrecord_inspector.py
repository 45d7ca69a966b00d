"""ETRecord + Inspector: the seed snippet, numeric gaps, typed errors, and ExecuTorch reading ours."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import ref_process
import torch

from edgetorch.devtools import Inspector
from edgetorch.devtools.etrecord import parse_etrecord
from edgetorch.devtools.inspector import InspectorError
from edgetorch.exir import to_edge, to_edge_transform_and_lower
from edgetorch.kernels import registry
from edgetorch.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.lin = torch.nn.Linear(144, 5)

    def forward(self, x):
        return self.lin(torch.relu(self.conv(x)).flatten(1))


def _compile(tmp_path, lower=to_edge_transform_and_lower):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    ep = torch.export.export(CNN().eval(), (x,))
    et = lower(ep, generate_etrecord=True).to_executorch()
    record = et.get_etrecord()
    record.update_representative_inputs([x])
    path = tmp_path / "debug.etrecord"
    record.save(path)
    return et, record, path, x


def _run(et, inputs, buffer=1 << 20):
    program = Runtime.get().load_program(et.buffer, enable_etdump=True, debug_buffer_size=buffer)
    method = program.load_method("forward")
    for x in inputs:
        method.execute([x.numpy()])
    return program.event_tracer


def test_seed_snippet_etrecord_and_inspector(tmp_path, capsys):
    et, _, path, x = _compile(tmp_path)
    inspector = Inspector(etdump_data=_run(et, [x, x]), etrecord=str(path))
    inspector.print_data_tabular()
    out = capsys.readouterr().out
    assert "native_call_convolution.out" in out and "aten.convolution.default" in out
    assert "OPERATOR_CALL" not in out
    df = inspector.to_dataframe()
    assert len(df.columns) == 17 and list(df.columns)[3] == "p10 (ms)"
    execute = next(b for b in inspector.event_blocks if b.name == "Execute")
    conv = next(e for e in execute.events if e.name == "native_call_convolution.out")
    assert len(conv.perf_data.raw) == 2 and conv.debug_handles == 1
    assert inspector.find_total_for_module("conv") == pytest.approx(conv.perf_data.avg)
    tsv = tmp_path / "t.tsv"
    inspector.save_data_to_tsv(str(tsv))
    assert "native_call_relu.out" in tsv.read_text()


def test_get_etrecord_without_flag_raises():
    ep = torch.export.export(CNN().eval(), (torch.randn(1, 3, 8, 8),))
    with pytest.raises(RuntimeError, match="ETRecord was not generated"):
        to_edge(ep).to_executorch().get_etrecord()


def test_roundtrip_keeps_maps_and_programs(tmp_path):
    et, record, path, x = _compile(tmp_path, to_edge)
    parsed = parse_etrecord(path)
    # in memory the recorded keys are ints; the file stores JSON, so parsed keys are strings
    # (as in ExecuTorch, whose etrecord test compares with json.loads(json.dumps(...)))
    assert parsed._debug_handle_map == json.loads(json.dumps(record._debug_handle_map))
    assert {k for k in parsed._debug_handle_map["forward"]} == \
        {str(k) for k in et.debug_handle_map["forward"]}
    torch.testing.assert_close(parsed.edge_dialect_program.module()(x),
                               record.edge_dialect_program.module()(x))
    torch.testing.assert_close(parsed._representative_inputs[0], x)


@pytest.mark.parametrize("saved", [True, False])
def test_numeric_gap_float_model_is_tiny(tmp_path, saved):
    et, record, path, x = _compile(tmp_path)
    inspector = Inspector(etdump_data=_run(et, [x]), etrecord=str(path) if saved else record)
    gaps = inspector.calculate_numeric_gap("MSE")
    assert len(gaps) >= 3
    assert max(g for row in gaps["gap"] for g in row) <= 1e-6
    assert inspector.calculate_numeric_gap("L1")["gap"].map(len).min() == 1


def test_perturbed_kernel_is_the_largest_gap(tmp_path, monkeypatch):
    et, record, _, x = _compile(tmp_path)
    entry = registry.KERNELS["aten::relu.out"]

    def bad_relu(*args):
        out = entry.fn(*args)
        out += 0.5
        return out

    monkeypatch.setitem(registry.KERNELS, "aten::relu.out",
                        registry.KernelEntry(entry.name, bad_relu, entry.num_args))
    gaps = Inspector(etdump_data=_run(et, [x]), etrecord=record).calculate_numeric_gap("MSE")
    worst = gaps.iloc[int(np.argmax([max(g) for g in gaps["gap"]]))]
    assert worst["aot_ops"] == ["relu"]  # the ATen node, as ExecuTorch names it
    assert max(worst["gap"]) > 0.2


def test_missing_inputs_and_different_runs(tmp_path):
    et, record, _, x = _compile(tmp_path)
    record._representative_inputs = None
    tracer = _run(et, [x, x + 1])
    inspector = Inspector(etdump_data=tracer, etrecord=record)
    assert [b.name for b in inspector.event_blocks] == ["Default", "Execute", "Execute_1"]
    with pytest.raises(InspectorError, match="representative inputs"):
        inspector.calculate_numeric_gap("MSE")


_REF_PARSE = r"""
import sys
from executorch.devtools.etrecord import parse_etrecord
r = parse_etrecord(sys.argv[1])
ops = [str(n.target) for n in r.edge_dialect_program.graph.nodes if n.op == "call_function"]
print(sorted(r._debug_handle_map["forward"].items()), ops)
"""


@pytest.mark.compat
def test_executorch_parses_our_etrecord(tmp_path):
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    _, record, path, _ = _compile(tmp_path)
    out = ref_process.run([str(ref_python()), "-c", _REF_PARSE, str(path)], env=_clean_env(),
                          check=True, capture_output=True, text=True, timeout=600).stdout
    # ExecuTorch's parser gives the JSON (string) keys of the file
    assert str(sorted((str(k), v) for k, v in record._debug_handle_map["forward"].items())) in out
    assert "aten.convolution.default" in out


def test_standalone_generate_etrecord(tmp_path):
    import copy

    from edgetorch.devtools import generate_etrecord

    x = torch.randn(1, 3, 8, 8)
    ep = torch.export.export(CNN().eval(), (x,))
    edge = to_edge(ep)
    edge_copy = copy.deepcopy(edge)
    et = edge.to_executorch()
    generate_etrecord(tmp_path / "r.etrecord", edge_copy, et, exported_program=ep)
    parsed = parse_etrecord(tmp_path / "r.etrecord")
    assert parsed._debug_handle_map == {
        "forward": {str(k): v for k, v in et.debug_handle_map["forward"].items()}}
    assert parsed.exported_program is not None
    torch.testing.assert_close(parsed.exported_program.module()(x), ep.module()(x))


def test_loading_tensors_never_unpickles(tmp_path):
    import zipfile

    from edgetorch.errors import UnsafeFileError

    path = tmp_path / "evil.etrecord"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ETRECORD_V0", "")
        z.writestr("representative_inputs", b"\x80\x04cos\nsystem\n.")  # a pickle, not a tensor file
    with pytest.raises(UnsafeFileError, match="weights_only"):
        parse_etrecord(path)
