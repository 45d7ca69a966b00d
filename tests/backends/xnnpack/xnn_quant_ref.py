"""Reference side of the quantized XNNPACK compat tests; runs ONLY in the reference venv.

    python xnn_quant_ref.py export DIR [--graphs-only] MODEL:MODE [MODEL:MODE ...]
        For each built-in example MODEL and MODE (see xnn_quant_common.MODES): quantize it with
        ExecuTorch's XNNPACKQuantizer (or torchao's quantize_ for 8da4w), write
        DIR/MODEL.MODE.graph.json (the converted graph, summarized), lower it with ExecuTorch's
        XnnpackPartitioner to DIR/MODEL.MODE.pte (not with --graphs-only), or write
        DIR/MODEL.MODE.err.txt. MODEL may also be ``linear_heavy`` (xnn_quant_common).
    python xnn_quant_ref.py run DIR
        For every DIR/NAME.pte with DIR/NAME.in.npz, run ``forward`` in ExecuTorch's runtime
        (real XNNPACK, quantized kernels loaded) and write DIR/NAME.out.npz or DIR/NAME.err.txt.

Only edgetorch.examples (torch only) is imported from edgetorch.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "src"))


def export(directory: str, *cases: str) -> None:
    import executorch.kernels.quantized  # noqa: F401  (the Q/DQ out variants)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.exir import to_edge_transform_and_lower
    from xnn_quant_common import build, quantize, summarize

    d = Path(directory)
    graphs_only = "--graphs-only" in cases
    for case in (c for c in cases if c != "--graphs-only"):
        name, mode = case.split(":")
        stem = d / f"{name}.{mode}"
        try:
            model, inputs = build(name)
            ep, qmodel = quantize(model, inputs, mode, XNNPACKQuantizer,
                                  get_symmetric_quantization_config)
            if mode not in ("8da4w", "fp32"):
                Path(f"{stem}.graph.json").write_text(json.dumps(summarize(qmodel)))
            if graphs_only:
                continue
            et = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
            Path(f"{stem}.pte").write_bytes(et.to_executorch().buffer)
        except Exception:
            Path(f"{stem}.err.txt").write_text(traceback.format_exc())


def run(directory: str) -> None:
    import executorch.kernels.quantized  # noqa: F401  (non-delegated Q/DQ kernels)
    import torch
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    for pte in sorted(Path(directory).glob("*.pte")):
        stem = pte.with_suffix("")
        if not Path(f"{stem}.in.npz").exists():
            continue
        try:
            with np.load(f"{stem}.in.npz") as f:
                inputs = [torch.from_numpy(f[f"arr_{i}"]) for i in range(len(f.files))]
            method = runtime.load_program(pte).load_method("forward")
            outputs = method.execute(inputs)
            np.savez(f"{stem}.out.npz", *[o.detach().numpy() for o in outputs])
        except Exception:
            Path(f"{stem}.err.txt").write_text(traceback.format_exc())


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    {"export": export, "run": run}[cmd](*rest)
