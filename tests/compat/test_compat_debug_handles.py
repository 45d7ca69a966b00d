"""Debug handles and the emitter's provenance maps equal ExecuTorch 1.5.1's for the same models.

ExecuTorch's Inspector joins runtime events to model nodes through these numbers, so they
must match exactly: every Edge node's handle (compared in walk order, since node names differ
between the two compilers), and ``debug_handle_map`` / ``delegate_map`` /
``instruction_id_to_num_outs_map`` of the emitted program.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ref_process
import torch
from ref_debug_handles import handle_sequence, summarize
from refenv import EXPORT_TIMEOUT_S, _clean_env, ref_available, ref_python

from edgetorch.examples import load_model_spec
from edgetorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

pytestmark = pytest.mark.compat

HERE = Path(__file__).parent
MODELS = HERE / "debug_handle_models.py"
CASES = [
    ("cnn", ""),
    ("mlp", ""),
    (f"{MODELS}:conv_relu_linear", ""),
    (f"{MODELS}:branchy", ""),  # nested cond: handles continue inside the branches
    (f"{MODELS}:conv_relu_linear", "xnnpack"),
    ("cnn", "xnnpack"),
    # Two delegates whose backend returns a debug_handle_map of its own (-> delegate_map).
    (f"{HERE / 'ref_delegation.py'}:AddMmModel", "demo"),
]
IDS = [f"{spec.rpartition(':')[2]}{'-' + how if how else ''}" for spec, how in CASES]


def _theirs(spec: str, how: str, tmp: Path) -> dict:
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    out = tmp / "ref.json"
    cmd = [str(ref_python()), str(HERE / "ref_debug_handles.py"), spec, str(out)]
    ref_process.run(cmd + ([f"--{how}"] if how else []), env=_clean_env(), check=True,
                    capture_output=True, timeout=EXPORT_TIMEOUT_S)
    return json.loads(out.read_text())


def _edge(spec: str, how: str):
    model, inputs = load_model_spec(spec)
    ep = torch.export.export(model, inputs)
    if how == "xnnpack":
        from edgetorch.backends.xnnpack import XnnpackPartitioner

        return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    if how == "demo":
        from edgetorch.backends.demo.compiler import AddMulPartitionerDemo

        return to_edge(ep).to_backend(AddMulPartitionerDemo())
    return to_edge(ep)


def _normalized(d: dict) -> dict:
    return json.loads(json.dumps(d))


@pytest.mark.parametrize(("spec", "how"), CASES, ids=IDS)
def test_debug_handles_and_maps_equal_executorchs(spec, how, tmp_path):
    theirs = _theirs(spec, how, tmp_path)
    edge = _edge(spec, how)
    gms = {name: edge.exported_program(name).graph_module for name in edge.methods}
    # to_executorch lowers the Edge graphs in place (as ExecuTorch's): keep their handles first.
    handles_before = {name: handle_sequence(gm) for name, gm in gms.items()}
    # ExecuTorch leaves constant subexpressions (a Linear's weight permute) to run time; with
    # folding off our instruction lists are the same, so the maps must be equal.
    et = edge.to_executorch(ExecutorchBackendConfig(fold_constants=False, fuse_batch_norm=False))
    summary = summarize(gms, et)
    summary["handles"] = handles_before
    ours = _normalized(summary)
    assert ours["handles"] == theirs["handles"]
    assert ours["debug_handle_map"] == theirs["debug_handle_map"]
    assert ours["delegate_map"] == theirs["delegate_map"]
    assert ours["instruction_id_to_num_outs_map"] == theirs["instruction_id_to_num_outs_map"]


@pytest.mark.parametrize("spec", ["cnn", "mlp"])
def test_folded_programs_keep_executorchs_handles_for_what_remains(spec, tmp_path):
    """With constant folding (our default) an instruction may go away, never gain or
    change a handle: our handles are ExecuTorch's with the folded ones left out."""
    theirs = _theirs(spec, "", tmp_path)["debug_handle_map"]["forward"]
    ours = _edge(spec, "").to_executorch().debug_handle_map["forward"]
    remaining = iter([theirs[k] for k in sorted(theirs, key=int)])
    for i in sorted(ours):
        assert any(h == ours[i] for h in remaining), f"instruction {i}: {ours[i]} not in order"
