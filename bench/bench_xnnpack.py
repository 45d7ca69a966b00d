"""The XNNPACK path: edgetorch's XNNPACK lowering vs its portable path vs eager vs ExecuTorch.

For each model, in one run with one thread everywhere:

* eager PyTorch,
* edgetorch portable: ``to_edge(...).to_executorch()`` in edgetorch's runtime,
* edgetorch XNNPACK: ``to_edge_transform_and_lower(..., [XnnpackPartitioner()])`` in
  edgetorch's runtime (its NumPy XNNPACK backend),
* ExecuTorch XNNPACK: ExecuTorch 1.5.1's own ``--xnnpack`` export in its runtime (real XNNPACK),
* ExecuTorch running edgetorch's XNNPACK ``.pte`` (same runtime, our blobs).

Latency is the median over ``--runs`` executions after a warm-up; ratios are to eager.

    .venv/bin/python bench/bench_xnnpack.py [mobilenet_v2 resnet18 ...] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat"))
from refenv import RefToolError, ref_available, ref_export, ref_time  # noqa: E402
from timing import median_ms  # noqa: E402

import edgetorch.backends.xnnpack  # noqa: E402,F401  (registers the runtime backend)
from edgetorch.backends.xnnpack import XnnpackPartitioner  # noqa: E402
from edgetorch.examples import get_example  # noqa: E402
from edgetorch.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

COLUMNS = [("eager_ms", "eager"), ("portable_ms", "ours portable"),
           ("xnnpack_ms", "ours XNNPACK"), ("et_xnnpack_ms", "ET XNNPACK"),
           ("et_runs_ours_ms", "ET on our .pte")]


def _ours_ms(pte: bytes, inputs: list[np.ndarray], runs: int) -> float:
    method = Runtime.get().load_program(pte).load_method("forward")
    return median_ms(lambda: method.execute(inputs), runs)


def _ref_ms(pte: Path, inputs: list[np.ndarray], runs: int) -> float:
    timing = ref_time(pte, inputs, runs)
    return float(timing.get("median_ms", timing.get("mean_ms")))


def bench(name: str, runs: int, tmp: Path, with_ref: bool) -> dict:
    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    np_inputs = [x.numpy() for x in inputs]
    with torch.no_grad():
        eager_ms = median_ms(lambda: model(*inputs), runs)
    portable = to_edge(torch.export.export(model, inputs)).to_executorch().buffer
    xnnpack = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    row = {"model": name, "eager_ms": eager_ms,
           "portable_ms": _ours_ms(portable, np_inputs, runs),
           "xnnpack_ms": _ours_ms(xnnpack.buffer, np_inputs, runs)}
    if with_ref:
        try:
            theirs = ref_export(name, tmp / f"{name}.et-xnnpack.pte", xnnpack=True)
            row["et_xnnpack_ms"] = _ref_ms(theirs.pte, np_inputs, runs)
            ours = tmp / f"{name}.edgetorch-xnnpack.pte"
            ours.write_bytes(xnnpack.buffer)
            row["et_runs_ours_ms"] = _ref_ms(ours, np_inputs, runs)
        except RefToolError as e:
            print(f"({name}: ExecuTorch could not export or run it: {str(e).splitlines()[0]})")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mobilenet_v2", "resnet18"])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with_ref = ref_available()
    if not with_ref:
        print("(reference ExecuTorch env not found: showing edgetorch and eager only)")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [bench(name, args.runs, Path(tmp), with_ref) for name in args.models]

    print(f"{'milliseconds':<16}" + "".join(f"{title:>16}" for _, title in COLUMNS))
    for r in rows:
        print(f"{r['model']:<16}" + "".join(
            f"{r[k]:>16.2f}" if k in r else f"{'-':>16}" for k, _ in COLUMNS))
    print(f"\n{'ratio to eager':<16}" + "".join(f"{title:>16}" for _, title in COLUMNS[1:]))
    for r in rows:
        print(f"{r['model']:<16}" + "".join(
            f"{r[k] / r['eager_ms']:>15.2f}x" if k in r else f"{'-':>16}"
            for k, _ in COLUMNS[1:]))
    print("\nours XNNPACK vs ours portable: " + ", ".join(
        f"{r['model']} {r['portable_ms'] / r['xnnpack_ms']:.2f}x faster" for r in rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
