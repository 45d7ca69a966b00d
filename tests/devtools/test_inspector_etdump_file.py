"""The Inspector on ETDump files (with and without a debug buffer) and the CLI."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from edgetorch.devtools import Inspector
from edgetorch.devtools.inspector import InspectorError
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.runtime import Runtime
from edgetorch.runtime import event_tracer as T
from edgetorch.schema import etdump as E
from edgetorch.schema.scalar_type import ScalarType

_SCALAR = {np.dtype(np.float32): ScalarType.FLOAT, np.dtype(np.int64): ScalarType.LONG,
           np.dtype(np.int32): ScalarType.INT, np.dtype(np.bool_): ScalarType.BOOL}


def etdump_from_tracer(tracer: T.RecordingEventTracer) -> tuple[bytes, bytes]:
    """ETDump + debug buffer from a live tracer (until Program.write_etdump_result_to_file
    lands on main): tensors at 64-byte boundaries, as ExecuTorch's buffer holds them."""
    buf = bytearray()

    def tensor(a: np.ndarray) -> E.Tensor:
        a = np.ascontiguousarray(a)
        buf.extend(b"\0" * (-len(buf) % 64))
        offset = len(buf)
        buf.extend(a.tobytes())
        strides = [s // a.itemsize for s in a.strides]
        return E.Tensor(_SCALAR[a.dtype], list(a.shape), strides, offset)

    runs = []
    for block in tracer.run_blocks:
        events = []
        for e in block.events:
            if isinstance(e, T.ProfileEvent):
                events.append(E.Event(profile_event=E.ProfileEvent(
                    e.name, e.chain_index, e.instruction_id, e.delegate_debug_id_int,
                    e.delegate_debug_id_str, e.delegate_debug_metadata, e.start_time,
                    e.end_time)))
                continue
            if isinstance(e.value, np.ndarray):
                value = E.Value(E.ValueType.TENSOR, tensor=tensor(e.value))
            else:
                value = E.Value(E.ValueType.TENSOR_LIST, tensor_list=E.TensorList(
                    [tensor(a) for a in e.value]))
            value.output = E.Bool(True) if e.output else None
            events.append(E.Event(debug_event=E.DebugEvent(
                e.chain_index % (1 << 64), e.instruction_id, value, e.delegate_debug_id_int,
                e.delegate_debug_id_str, e.name)))
        runs.append(E.RunData(block.name, block.bundled_input_index, None, events))
    return E.serialize_to_etdump_flatcc(E.ETDump(0, runs)), bytes(buf) + b"\0" * 64



class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 2


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("etdump")
    torch.manual_seed(0)
    x = torch.randn(1, 3, 6, 6)
    ep = torch.export.export(Small().eval(), (x,))
    et = to_edge_transform_and_lower(ep, generate_etrecord=True).to_executorch()
    record = et.get_etrecord()
    record.update_representative_inputs([x])
    record.save(d / "debug.etrecord")
    program = Runtime.get().load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 16)
    program.load_method("forward").execute([x.numpy()])
    etdump, buffer = etdump_from_tracer(program.event_tracer)
    (d / "run.etdp").write_bytes(etdump)
    (d / "run.bin").write_bytes(buffer)
    return d


def test_seed_snippet_with_etdump_path(files, capsys):
    inspector = Inspector(etdump_path=str(files / "run.etdp"),
                          etrecord=str(files / "debug.etrecord"))
    inspector.print_data_tabular()
    out = capsys.readouterr().out
    assert "native_call_convolution.out" in out and "aten.relu.default" in out


def test_numeric_gap_from_files(files):
    inspector = Inspector(etdump_path=str(files / "run.etdp"), etrecord=str(files / "debug.etrecord"),
                          debug_buffer_path=str(files / "run.bin"))
    gaps = inspector.calculate_numeric_gap("SNR")
    assert len(gaps) == 3 and all(g == [float("inf")] or g[0] > 100 for g in gaps["gap"])


def test_missing_debug_buffer_is_a_typed_error(files):
    inspector = Inspector(etdump_path=str(files / "run.etdp"), etrecord=str(files / "debug.etrecord"))
    with pytest.raises(InspectorError, match="debug_buffer_path"):
        inspector.calculate_numeric_gap("MSE")


def test_cli_prints_table_and_tsv(files):
    tsv = files / "out.tsv"
    cmd = [sys.executable, "-m", "edgetorch.devtools.inspector.inspector_cli", "--etdump_path",
           str(files / "run.etdp"), "--etrecord_path", str(files / "debug.etrecord"),
           "--tsv_path", str(tsv)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    assert "native_call_mul.out" in out
    # ExecuTorch's TSV starts with the row index column (no header)
    assert tsv.read_text().splitlines()[0].split("\t")[:3] == ["", "event_block_name",
                                                               "event_name"]
