"""Reference side of the XNNPACK compat tests; runs ONLY in the reference venv (executorch 1.5.1).

    python xnn_ref.py serialize GRAPH.json OUT.bin
        ExecuTorch's own serialize_xnnpack_binary on the XNNGraph described by the JSON
        (ExecuTorch's dataclass JSON: fields in order, unions with ``<field>_type``).
    python xnn_ref.py dynamic DIR
        Lower a Linear-ReLU-reshape model with a dynamic batch (1..10) to XNNPACK: DIR/dynamic.pte,
        and DIR/dynamic.b<N>.npz (input, ExecuTorch's output) for batches 1, 3 and 10.
    python xnn_ref.py run DIR
        For every DIR/NAME.pte with DIR/NAME.in.npz (arr_0, arr_1, ...), run ``forward`` in
        ExecuTorch's runtime (real XNNPACK) and write DIR/NAME.out.npz, or DIR/NAME.err.txt.

Nothing from edgetorch is imported here.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np


def serialize(graph_json: str, out: str) -> None:
    from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNGraph
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import (
        serialize_xnnpack_binary,
    )
    from executorch.exir._serialize._dataclass import _json_to_dataclass

    with open(graph_json) as f:
        graph = _json_to_dataclass(json.load(f), XNNGraph)
    Path(out).write_bytes(serialize_xnnpack_binary(graph, bytearray()))


def run(directory: str) -> None:
    import torch
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    for pte in sorted(Path(directory).glob("*.pte")):
        stem = pte.with_suffix("")
        try:
            with np.load(f"{stem}.in.npz") as d:
                inputs = [torch.from_numpy(d[f"arr_{i}"]) for i in range(len(d.files))]
            method = runtime.load_program(pte).load_method("forward")
            outputs = method.execute(inputs)
            np.savez(f"{stem}.out.npz", *[o.detach().numpy() for o in outputs])
        except Exception:
            Path(f"{stem}.err.txt").write_text(traceback.format_exc())


def dynamic(directory: str) -> None:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.relu(self.linear(x)).reshape(-1, 2, 2)

    torch.manual_seed(0)
    model = Model().eval()
    batch = torch.export.Dim("batch", min=1, max=10)
    ep = torch.export.export(model, (torch.randn(3, 8),), dynamic_shapes=({0: batch},))
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    pte = Path(directory) / "dynamic.pte"
    pte.write_bytes(program.buffer)
    method = Runtime.get().load_program(pte).load_method("forward")
    for b in (1, 3, 10):
        x = torch.randn(b, 8)
        np.savez(Path(directory) / f"dynamic.b{b}.npz", x.numpy(), method.execute([x])[0].numpy())


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    {"serialize": serialize, "run": run, "dynamic": dynamic}[cmd](*rest)
