"""debug_format: the operator graph built from an FX graph has ExecuTorch 1.5.1's tree (same
names, inputs, constants, shapes, module groups), compared node by node with ExecuTorch's
own ``FXOperatorGraph`` on the same torch.export graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from edgetorch.devtools.debug_format.base_schema import OperatorGraph, OperatorNode, ValueNode
from edgetorch.devtools.debug_format.et_schema import FXOperatorGraph
from edgetorch.exir import to_edge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))

# The model and the tree dump, shared by both sides (the reference side runs this text with
# ExecuTorch's module; ours with edgetorch's).
_COMMON = '''
import json, torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 6)
    def forward(self, x):
        return torch.relu(self.lin(x))

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
    def forward(self, x):
        y = self.block(x)
        a, b = torch.split(y, 3, dim=1)
        z = torch.cat([a, b * 2.0], dim=1)
        values, idx = torch.topk(z, 2)
        return z.sum(dim=[0], keepdim=True), values, idx

def dump(e):
    if hasattr(e, "graph_name"):
        return {"graph": e.graph_name, "meta": e.metadata, "elements": [dump(x) for x in e.elements]}
    d = {"kind": type(e).__name__, "name": e.name, "shapes": e.output_shapes,
         "inputs": [i.name if hasattr(i, "name") else i for i in (e.inputs or [])],
         "named_args": e.named_args, "meta": sorted((e.metadata or {}).keys())}
    if type(e).__name__ == "OperatorNode":
        d["op"] = e.op
    else:
        d["dtype"], d["val"] = e.dtype, str(e.val)
    return d

def trees(FXOperatorGraph):
    ep = torch.export.export(M(), (torch.randn(2, 4),), strict=True)
    gm = ep.graph_module
    return [dump(FXOperatorGraph.gen_operator_graph(gm, skip_stack_trace=skip, enable_module_hierarchy=h))
            for skip, h in ((False, False), (True, True))]
'''

_MAIN = '''
import warnings
warnings.simplefilter("ignore")
from {package}.devtools.debug_format.et_schema import FXOperatorGraph
print(json.dumps(trees(FXOperatorGraph)))
'''


def _trees(python: str, package: str, env: dict | None = None) -> list:
    out = subprocess.run([python, "-c", _COMMON + _MAIN.format(package=package)], env=env,
                         check=True, capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def _ours() -> list:
    return _trees(sys.executable, "edgetorch")


def test_tree_matches_executorch():
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    assert _ours() == _trees(str(ref_python()), "executorch", _clean_env())


def test_tree_layout_and_constants():
    flat, grouped = _ours()
    assert [g["graph"] for g in flat["elements"]] == ["inputs", "forward", "outputs"]
    body = {e["name"]: e for e in flat["elements"][1]["elements"]}
    # the split's getitems stand for the split itself; the scalar and the dim list are constants
    assert body["cat_"]["op"] == "cat.default"
    assert body["cat_"]["inputs"] == ["split_", "mul_", "dim_3"]
    assert body["dim_5"]["kind"] == "ValueNode" and body["dim_5"]["val"] == "[0]"
    assert body["other_2"]["val"] == "2.0" and body["keepdim_6"]["val"] == "True"
    # with the module hierarchy, every call sits in its source function's group
    modules = {e["graph"]: e for e in grouped["elements"][1]["elements"] if "graph" in e}
    assert modules["linear"]["meta"] == {"module_type": "Linear"}
    assert all("stack_trace" not in n["meta"] for m in modules.values() for n in m["elements"])


def test_out_variant_call_stands_for_its_buffer():
    """After to_executorch, a reader of an ``out=`` buffer reads the call that filled it."""
    class Two(torch.nn.Module):
        def forward(self, x):
            return torch.sin(x) * 2

    et = to_edge(torch.export.export(Two(), (torch.randn(3),))).to_executorch()
    graph = FXOperatorGraph.gen_operator_graph(et.exported_program().graph_module)
    inputs, body, outputs = graph.elements
    ops = [n for n in body.elements if isinstance(n, OperatorNode)]
    sin = next(n for n in ops if "sin" in n.op)
    mul = next(n for n in ops if "mul" in n.op)
    assert sin in mul.inputs and not any("alloc" in n.name for n in body.elements)
    assert outputs.elements[0].inputs == [mul]
    assert isinstance(inputs.elements[0], ValueNode) and isinstance(graph, OperatorGraph)
