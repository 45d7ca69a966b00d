"""Edge graphs name nodes as ExecuTorch 1.5.1's do (``aten_convolution_default``,
``aten_cumsum_default``, a second convolution ``aten_convolution_default_1``), so the per-op
rows of ``get_delegation_info`` equal ExecuTorch's for the same model, with and without
XNNPACK. Without XNNPACK every node is named as ExecuTorch names it, ``getitem`` suffixes
included (counted in graph order after dead code goes, as ExecuTorch's re-trace counts them);
with it the delegate calls' ``getitem`` suffixes may differ (ExecuTorch's follow the names its
partitioning took and dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ref_process
import torch
from ref_node_names import summarize
from refenv import EXPORT_TIMEOUT_S, _clean_env, ref_available, ref_python

from edgetorch.devtools.backend_debug import get_delegation_info
from edgetorch.examples import load_model_spec
from edgetorch.exir import to_edge, to_edge_transform_and_lower

pytestmark = pytest.mark.compat

HERE = Path(__file__).parent
CASES = [("cnn", False), ("cnn", True), (f"{HERE / 'node_name_models.py'}:cumsum_convs", False),
         (f"{HERE / 'node_name_models.py'}:cumsum_convs", True),
         (f"{HERE / 'debug_handle_models.py'}:conv_relu_linear", True)]
IDS = [f"{spec.rpartition(':')[2]}{'-xnnpack' if xnn else ''}" for spec, xnn in CASES]


def _theirs(spec: str, xnnpack: bool, tmp: Path) -> dict:
    if not ref_available():
        pytest.skip("reference environment missing")
    out = tmp / "ref.json"
    cmd = [str(ref_python()), str(HERE / "ref_node_names.py"), spec, str(out)]
    ref_process.run(cmd + (["--xnnpack"] if xnnpack else []), env=_clean_env(), check=True,
                    capture_output=True, timeout=EXPORT_TIMEOUT_S)
    return json.loads(out.read_text())


def _ours(spec: str, xnnpack: bool) -> dict:
    model, inputs = load_model_spec(spec)
    ep = torch.export.export(model.eval(), inputs)
    if xnnpack:
        from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(ep)
    program = edge.exported_program()
    return summarize(program, get_delegation_info(program.graph_module))


def _operator_names(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("aten_")]


@pytest.mark.parametrize("spec,xnnpack", CASES, ids=IDS)
def test_edge_node_names_and_delegation_rows_match_executorch(spec, xnnpack, tmp_path):
    theirs = _theirs(spec, xnnpack, tmp_path)
    ours = _ours(spec, xnnpack)
    assert ours["columns"] == theirs["columns"]
    assert ours["rows"] == theirs["rows"]
    if xnnpack:
        assert _operator_names(ours["names"]) == _operator_names(theirs["names"])
    else:
        assert ours["names"] == theirs["names"]
