"""ExecuTorch side of the provenance compat test. Runs INSIDE the reference venv.

    python ref_debug_handles.py MODEL OUT.json [--xnnpack | --demo]

exports ``MODEL`` (an example name or ``file.py:factory``) with ExecuTorch's own ``to_edge``
(or ``to_edge_transform_and_lower`` with XNNPACK, or ``to_backend`` with
ExecuTorch's ``AddMulPartitionerDemo``) and writes, as JSON: every edge node's debug
handle in walk order (see :func:`handle_sequence`), and the emitter's ``debug_handle_map``, ``delegate_map`` and
``instruction_id_to_num_outs_map``. :func:`summarize` is shared with the edgetorch side so the
two summaries are built the same way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(SRC))

from edgetorch.examples import load_model_spec  # noqa: E402


def _target(node: torch.fx.Node) -> str:
    if node.op != "call_function":
        return node.op
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        target = getattr(target, "_op", target)  # ExecuTorch's EdgeOpOverload wraps it
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__name__", str(target))


def handle_sequence(gm: torch.fx.GraphModule) -> list[list]:
    """``[[target, debug_handle], ...]`` for every node but placeholders and outputs, graph
    by graph breadth first (the top graph, then the branches of its ``cond`` nodes) -- the
    order both numberings walk. Node names differ between the two compilers; this does not."""
    out, queue = [], [gm]
    while queue:
        current = queue.pop(0)
        for node in current.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            out.append([_target(node), node.meta.get("debug_handle")])
            if node.op == "call_function" and node.target is torch.ops.higher_order.cond:
                queue += [current.get_submodule(node.args[i].target) for i in (1, 2)]
    return out


def _keys_to_str(d):
    """JSON keys are strings; make the ints explicit so both sides compare the same way."""
    if isinstance(d, dict):
        return {str(k): _keys_to_str(v) for k, v in d.items()}
    if isinstance(d, tuple):
        return [_keys_to_str(v) for v in d]
    if isinstance(d, list):
        return [_keys_to_str(v) for v in d]
    return d


def summarize(edge_gms: dict[str, torch.fx.GraphModule], et) -> dict:
    return {
        "handles": {name: handle_sequence(gm) for name, gm in edge_gms.items()},
        "debug_handle_map": _keys_to_str(et.debug_handle_map),
        "delegate_map": _keys_to_str(et.delegate_map),
        "instruction_id_to_num_outs_map": _keys_to_str(et.instruction_id_to_num_outs_map),
    }


def main() -> int:
    from executorch.exir import to_edge, to_edge_transform_and_lower

    model, inputs = load_model_spec(sys.argv[1])
    out = Path(sys.argv[2])
    ep = torch.export.export(model.eval(), inputs)
    if "--demo" in sys.argv[3:]:
        from executorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo

        edge = to_edge(ep).to_backend(AddMulPartitionerDemo())
    elif "--xnnpack" in sys.argv[3:]:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(ep)
    gms = {name: edge.exported_program(name).graph_module for name in edge.methods}
    summary_before = {name: handle_sequence(gm) for name, gm in gms.items()}
    et = edge.to_executorch()
    summary = summarize(gms, et)
    summary["handles"] = summary_before  # the emitter rewrites handles in place; keep edge's
    out.write_text(json.dumps(summary, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
