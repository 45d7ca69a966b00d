"""Memory trace (``edgetorch.util.activation_memory_profiler``) against the planned .pte and
against ExecuTorch 1.5.1's own profiler on the same model."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import ref_process
import torch
from torch.export import export

from edgetorch.examples import load_model_spec
from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.schema.pte import PteFile
from edgetorch.util.activation_memory_profiler import generate_memory_trace

MODELS = ["cnn", "mlp", "transformer_encoder"]


def _lowered(name: str, **config):
    model, inputs = load_model_spec(name)
    return to_edge(export(model, inputs)).to_executorch(ExecutorchBackendConfig(**config))


def _planned_values(buffer: bytes) -> set[tuple[int, int, int]]:
    """(memory id, offset, bytes) of every planned tensor EValue of ``forward``."""
    from edgetorch.schema.scalar_type import to_numpy_dtype

    plan = PteFile.parse(buffer).program.execution_plan[0]
    out = set()
    for value in plan.values:
        t = value.val
        info = getattr(t, "allocation_info", None)
        if info is None:
            continue
        nbytes = to_numpy_dtype(t.scalar_type).itemsize * int(torch.Size(t.sizes).numel())
        out.add((info.memory_id, info.memory_offset, nbytes))
    return out


@pytest.mark.parametrize("name", MODELS)
def test_offsets_are_the_planned_tensors(tmp_path, name):
    et = _lowered(name)
    trace = generate_memory_trace(et, tmp_path / "trace.json", enable_memory_offsets=True)
    assert json.loads((tmp_path / "trace.json").read_text()) == trace
    events = trace["traceEvents"]
    assert events and {e["cat"] for e in events} == {"memory_allocation"}
    triples = {(e["pid"], e["ts"], e["dur"]) for e in events}
    assert triples == _planned_values(et.buffer)


def test_one_event_per_tensor_and_live_step(tmp_path):
    et = _lowered("cnn")
    events = generate_memory_trace(et, tmp_path / "t.json")["traceEvents"]
    by_name = Counter(e["name"] for e in events)
    graph = et.exported_program().graph
    from edgetorch.exir.passes.memory_planning_pass import _specs_of, root

    checked = 0
    for node in graph.nodes:
        specs = _specs_of(node)
        if node.name in by_name and len(specs) == 1:
            first, last = root(specs[0]).lifetime
            assert by_name[node.name] == last - max(first, 0) + 1
            checked += 1
    assert checked >= 5
    # Without offsets, each step's tensors are stacked from 0, and ts + dur never overlap.
    for tid in {e["tid"] for e in events}:
        step = [e for e in events if e["tid"] == tid]
        assert step[0]["ts"] == 0
        for a, b in zip(step, step[1:]):
            assert b["ts"] == a["ts"] + a["dur"]
    assert set(events[0]["args"]) == {"op_name", "Memory ID", "fqn", "source", "bytes"}


def test_refuses_what_is_not_a_program_manager(tmp_path):
    model, inputs = load_model_spec("mlp")
    edge = to_edge(export(model, inputs))
    with pytest.raises(ValueError, match="ExecutorchProgramManager"):
        generate_memory_trace(edge, tmp_path / "t.json")


_REF_SCRIPT = """
import json, sys
import torch
sys.path.insert(0, sys.argv[3])
from edgetorch.examples import load_model_spec
from executorch.exir import to_edge
from executorch.util.activation_memory_profiler import generate_memory_trace
model, inputs = load_model_spec(sys.argv[1])
et = to_edge(torch.export.export(model, inputs)).to_executorch()
generate_memory_trace(et, sys.argv[2])
"""


@pytest.mark.compat
@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_same_trace_shape_as_executorch(tmp_path, name):
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    src = Path(__file__).resolve().parents[2] / "src"
    ref_json = tmp_path / "ref.json"
    ref_process.run([str(ref_python()), "-c", _REF_SCRIPT, name, str(ref_json), str(src)],
                    env=_clean_env(), check=True, capture_output=True, timeout=600)
    theirs = json.loads(ref_json.read_text())["traceEvents"]
    # ExecuTorch's program keeps its BatchNorm (edgetorch folds it ahead of time by default)
    ours = generate_memory_trace(_lowered(name, fuse_batch_norm=False), tmp_path / "ours.json")["traceEvents"]
    # The same planned tensors (by operator and size) with the same event and args keys; how
    # many steps each is alive follows each compiler's graph (ours folds constant weight
    # transposes, for one), so only the tensors are compared, not their lifetimes.
    def tensors(events):
        return {(e["args"]["op_name"], e["dur"]) for e in events}

    folded = {"aten.permute_copy.out"}  # weight transposes we fold at export
    assert tensors(ours) == {t for t in tensors(theirs) if t[0] not in folded}
    assert {k for e in ours for k in e} == {k for e in theirs for k in e}
    assert {k for e in ours for k in e["args"]} == {k for e in theirs for k in e["args"]}
