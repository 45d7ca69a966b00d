"""ETRecord's building API (ExecuTorch 1.5.1's ``add_*`` methods and their refusals) and the
lowered graph's planned buffers (``memory.alloc``) through the file, hostile specs refused."""

from __future__ import annotations

import json
import zipfile

import pytest
import torch

from edgetorch.devtools.etrecord import parse_etrecord
from edgetorch.devtools.etrecord._etrecord import (
    ETRecord,
    ETRecordReservedFileNames,
    generate_etrecord,
)
from edgetorch.errors import EdgeTorchError
from edgetorch.exir import to_edge
from edgetorch.exir.memory import alloc


class _M(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x).max(dim=1)[0] * 2


def _programs():
    aten = torch.export.export(_M(), (torch.randn(2, 5),))
    edge = to_edge(aten)
    return aten, edge, edge.to_executorch()  # lowers edge in place: alloc nodes appear


def test_add_api_and_refusals():
    aten, edge, et = _programs()
    record = ETRecord()
    record.add_exported_program({"forward": aten})
    assert record.exported_program is aten and record.export_graph_id == id(aten.graph)
    with pytest.raises(RuntimeError, match="already exists"):
        record.add_exported_program(aten)
    record.add_edge_dialect_program(edge)
    with pytest.raises(RuntimeError, match="already exists"):
        record.add_edge_dialect_program(edge)
    record.add_executorch_program(et)
    assert record._debug_handle_map == et.debug_handle_map  # keys as recorded (ints)
    with pytest.raises(RuntimeError, match="already exists"):
        record.add_executorch_program(et)
    for reserved in ETRecordReservedFileNames:
        with pytest.raises(RuntimeError, match="reserved name"):
            record.add_extra_export_modules({f"my_{reserved.value}": aten})
    with pytest.raises(RuntimeError, match="Unsupported graph module type"):
        record.add_extra_export_modules({"lowered": et})
    record.add_extra_export_modules({"aten": aten, "edge": edge})
    assert set(record.graph_map) == {"aten/forward", "edge/forward"}


def test_lowered_graph_keeps_planned_buffers(tmp_path):
    aten, edge, et = _programs()
    path = tmp_path / "r.etrecord"
    generate_etrecord(path, edge, et, exported_program=aten)
    parsed = parse_etrecord(path)
    def specs(gm):
        return [n.args[0] for n in gm.graph.nodes if n.target is alloc]
    ours = specs(edge.exported_program().graph_module)
    assert ours and specs(parsed.edge_dialect_program.graph_module) == ours
    assert json.loads(json.dumps(et.debug_handle_map)) == parsed._debug_handle_map


@pytest.mark.parametrize("spec", ["(2, 3)", "(2, x);7", "(2,3);999", ";".join(["(1,)"] * 2),
                                  "(" + "1," * 100 + ");7"])
def test_hostile_alloc_spec_refused(tmp_path, spec):
    aten, edge, et = _programs()
    good = tmp_path / "good.etrecord"
    generate_etrecord(good, edge, et)
    bad = tmp_path / "bad.etrecord"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "edge_dialect_exported_program/forward":
                program = json.loads(data)
                nodes = program["graph_module"]["graph"]["nodes"]
                node = next(n for n in nodes if n["target"] == "memory.alloc")
                node["inputs"][0]["arg"] = {"as_string": spec}
                data = json.dumps(program).encode()
            dst.writestr(item, data)
    with pytest.raises(EdgeTorchError, match="memory.alloc"):
        parse_etrecord(bad)


def test_dynamic_shape_program_through_the_file(tmp_path):
    """A program with a symbolic dimension reads back with its range constraints (torch 2.13's
    deserializer needs the unbounded default for an unset bound)."""
    batch = torch.export.Dim("batch", min=2, max=16)
    aten = torch.export.export(_M(), (torch.randn(4, 5),), dynamic_shapes=({0: batch},))
    edge = to_edge(aten, generate_etrecord=True)
    et = edge.to_executorch()
    path = tmp_path / "dyn.etrecord"
    et.get_etrecord().save(path)
    record = parse_etrecord(path)
    ranges = {str(r.lower): int(r.upper) for r in record.edge_dialect_program
              .range_constraints.values()}
    assert ranges == {"2": 16}
    x = torch.randn(7, 5)
    torch.testing.assert_close(record.edge_dialect_program.module()(x), _M()(x))
