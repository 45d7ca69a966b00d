"""Cross-tool: our Inspector on ExecuTorch 1.5.1's ETRecord + ETDump + debug buffer agrees
with ExecuTorch's Inspector, and ExecuTorch's Inspector reads our ETRecord + ETDump."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import ref_process
import torch

from edgetorch.devtools import Inspector
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_inspector_etdump_file import etdump_from_tracer  # noqa: E402

pytestmark = pytest.mark.compat

_MODEL = r"""
import sys, torch
class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.conv = torch.nn.Conv2d(3, 4, 3); self.lin = torch.nn.Linear(144, 5)
    def forward(self, x): return self.lin(torch.relu(self.conv(x)).flatten(1))
"""

_REF_GENERATE = _MODEL + r"""
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
out, xnn = sys.argv[1], sys.argv[2] == "1"
torch.manual_seed(0)
x = torch.randn(1, 3, 8, 8)
ep = torch.export.export(CNN().eval(), (x,))
parts = []
if xnn:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    parts = [XnnpackPartitioner()]
et = to_edge_transform_and_lower(ep, partitioner=parts, generate_etrecord=True).to_executorch()
rec = et.get_etrecord(); rec.update_representative_inputs([x]); rec.save(out + "/et.etrecord")
open(out + "/et.pte", "wb").write(et.buffer)
prog = Runtime.get().load_program(out + "/et.pte", enable_etdump=True, debug_buffer_size=1 << 20)
m = prog.load_method("forward")
for _ in range(2):
    m.execute([x])
prog.write_etdump_result_to_file(out + "/et.etdp", out + "/et.bin")
"""

_REF_INSPECT = r"""
import sys, json
from executorch.devtools import Inspector
d = sys.argv[1]
ins = Inspector(etdump_path=d + "/et.etdp", etrecord=d + "/et.etrecord",
                debug_buffer_path=d + "/et.bin")
df = ins.to_dataframe()
rows = [[r.event_block_name, r.event_name, list(r.op_types), bool(r.is_delegated_op),
         r.delegate_backend_name if isinstance(r.delegate_backend_name, str) else None]
        for r in df.itertuples()]
g = ins.calculate_numeric_gap("MSE")
gaps = [[list(r.runtime_ops), [float(v) for v in r.gap]] for r in g.itertuples()]
json.dump({"rows": rows, "conv": ins.find_total_for_module("conv"),
           "lin": ins.find_total_for_module("lin"), "gaps": gaps,
           "avg": [float(v) for v in df["avg (ms)"]]}, open(d + "/res.json", "w"))
"""


def _ref(script: str, *args: str) -> None:
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    ref_process.run([str(ref_python()), "-c", script, *args], env=_clean_env(), check=True,
                    capture_output=True, timeout=900)


def _ours(d: Path) -> dict:
    ins = Inspector(etdump_path=str(d / "et.etdp"), etrecord=str(d / "et.etrecord"),
                    debug_buffer_path=str(d / "et.bin"))
    df = ins.to_dataframe()
    rows = [[r.event_block_name, r.event_name, list(r.op_types), bool(r.is_delegated_op),
             r.delegate_backend_name if isinstance(r.delegate_backend_name, str) else None]
            for r in df.itertuples()]
    g = ins.calculate_numeric_gap("MSE")
    return {"rows": rows, "conv": ins.find_total_for_module("conv"),
            "lin": ins.find_total_for_module("lin"),
            "gaps": [[list(r.runtime_ops), list(r.gap)] for r in g.itertuples()],
            "avg": [float(v) for v in df["avg (ms)"]]}


def _agree(ours: dict, theirs: dict) -> None:
    assert ours["rows"] == theirs["rows"]
    # ExecuTorch scales a delegate event's start and end timestamps to ms *before* subtracting
    # (start/1e6 - end/1e6 in float64), so its duration carries a cancellation error of about
    # eps * timestamp: ~1e-9 ms for a machine up a few hours, ~1e-8 ms after days. We subtract the
    # integer timestamps first (exact); atol covers their rounding, rtol everything else.
    np.testing.assert_allclose(ours["avg"], theirs["avg"], rtol=1e-6, atol=1e-7)
    assert ours["conv"] == pytest.approx(theirs["conv"])
    assert ours["lin"] == pytest.approx(theirs["lin"])
    assert [g[0] for g in ours["gaps"]] == [g[0] for g in theirs["gaps"]]
    assert max(v for g in ours["gaps"] for v in g[1]) <= 1e-6
    assert max(v for g in theirs["gaps"] for v in g[1]) <= 1e-6


@pytest.mark.parametrize("xnnpack", [False, True], ids=["cnn", "xnnpack"])
def test_our_inspector_reads_executorch_files(tmp_path, xnnpack):
    _ref(_REF_GENERATE, str(tmp_path), "1" if xnnpack else "0")
    _ref(_REF_INSPECT, str(tmp_path))
    _agree(_ours(tmp_path), json.loads((tmp_path / "res.json").read_text()))


# ---- our files, read by ExecuTorch ---------------------------------------------------------

def _our_files(d: Path, xnnpack: bool) -> None:
    ns: dict = {}
    exec(_MODEL, ns)
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    ep = torch.export.export(ns["CNN"]().eval(), (x,))
    parts = []
    if xnnpack:
        from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        parts = [XnnpackPartitioner()]
    et = to_edge_transform_and_lower(ep, partitioner=parts, generate_etrecord=True).to_executorch()
    rec = et.get_etrecord()
    rec.update_representative_inputs([x])
    rec.save(d / "et.etrecord")
    program = Runtime.get().load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    for _ in range(2):
        method.execute([x.numpy()])
    etdump, buffer = etdump_from_tracer(program.event_tracer)
    (d / "et.etdp").write_bytes(etdump)
    (d / "et.bin").write_bytes(buffer)


@pytest.mark.parametrize("xnnpack", [False, True], ids=["cnn", "xnnpack"])
def test_executorch_inspector_reads_our_files(tmp_path, xnnpack):
    _our_files(tmp_path, xnnpack)
    _ref(_REF_INSPECT, str(tmp_path))
    _agree(_ours(tmp_path), json.loads((tmp_path / "res.json").read_text()))
