"""ExecuTorch side of the Edge node-name compat test. Runs INSIDE the reference venv.

    python ref_node_names.py MODEL OUT.json [--xnnpack]

exports ``MODEL`` (an example name or ``file.py:factory``) with ExecuTorch's ``to_edge`` (or
``to_edge_transform_and_lower`` with XNNPACK) and writes :func:`summarize` as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(SRC))

from edgetorch.examples import load_model_spec  # noqa: E402


def summarize(edge_program, delegation_info) -> dict:
    """Every node name of the Edge graph (lowered graphs too) and the per-operator rows of
    ``get_delegation_info``."""
    gm = edge_program.graph_module
    names = [n.name for n in gm.graph.nodes]
    for _, module in sorted(gm.named_children()):
        inner = getattr(module, "original_module", None)
        if inner is not None:
            names += [n.name for n in inner.graph.nodes]
    df = delegation_info.get_operator_delegation_dataframe()
    rows = [[str(v) for v in row] for row in df.itertuples(index=False)]
    return {"names": names, "rows": rows, "columns": list(df.columns)}


def main() -> None:
    spec, out = sys.argv[1], sys.argv[2]
    from executorch.devtools.backend_debug import get_delegation_info
    from executorch.exir import to_edge, to_edge_transform_and_lower

    model, inputs = load_model_spec(spec)
    ep = torch.export.export(model.eval(), inputs)
    if "--xnnpack" in sys.argv:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )
        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(ep)
    program = edge.exported_program()
    info = get_delegation_info(program.graph_module)
    Path(out).write_text(json.dumps(summarize(program, info)))


if __name__ == "__main__":
    main()
