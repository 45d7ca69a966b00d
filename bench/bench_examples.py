"""edgetorch vs ExecuTorch 1.5.1 on the built-in examples.

For each example: ``.pte`` size and planned memory of edgetorch's program and of ExecuTorch's
(``to_edge(...).to_executorch()`` in the reference environment), and latency of edgetorch's
runtime and of ExecuTorch's runtime, each as a ratio to eager PyTorch measured in the same run.
Latency is the median over ``--runs`` executions after a warm-up, with one thread everywhere.

    EDGETORCH_REF_PYTHON=.venv-ref/bin/python .venv/bin/python bench/bench_examples.py
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

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat"))
from refenv import RefToolError, ref_available, ref_export, ref_time  # noqa: E402
from timing import median_ms  # noqa: E402

from edgetorch.examples import EXAMPLES, get_example  # noqa: E402
from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402


def _planned(path: Path) -> int:
    meta = Runtime.get().load_program(path).metadata("forward")
    return sum(meta.memory_planned_buffer_size(i) for i in range(meta.num_memory_planned_buffers()))


def bench(name: str, runs: int, tmp: Path, with_ref: bool) -> dict:
    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    ours = tmp / f"{name}.edgetorch.pte"
    ours.write_bytes(to_edge(torch.export.export(model, inputs)).to_executorch().buffer)
    method = Runtime.get().load_program(ours).load_method("forward")
    np_inputs = [x.numpy() for x in inputs]
    with torch.no_grad():
        eager_ms = median_ms(lambda: model(*inputs), runs)
    ours_ms = median_ms(lambda: method.execute(np_inputs), runs)
    row = {"model": name, "ours_bytes": ours.stat().st_size, "ours_planned": _planned(ours),
           "eager_ms": eager_ms, "ours_ms": ours_ms}
    if with_ref:
        try:
            theirs = ref_export(name, tmp / f"{name}.executorch.pte")
            row.update(et_bytes=theirs.pte.stat().st_size, et_planned=_planned(theirs.pte))
            timing = ref_time(theirs.pte, np_inputs, runs)
            row["et_ms"] = float(timing.get("median_ms", timing.get("mean_ms")))
        except RefToolError as e:  # e.g. ExecuTorch lacks a kernel its own export uses
            print(f"({name}: ExecuTorch could not export or run it: {str(e).splitlines()[0]})")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=sorted(EXAMPLES))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with_ref = ref_available()
    if not with_ref:
        print("(reference ExecuTorch env not found: showing edgetorch and eager only)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            rows.append(bench(name, args.runs, Path(tmp), with_ref))
    head = (f"{'model':<20} {'pte bytes (ours / ET)':>26} {'planned (ours / ET)':>24} "
            f"{'eager ms':>9} {'ours/eager':>10} {'ET/eager':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        sizes = f"{r['ours_bytes']:,} / {r.get('et_bytes', 0):,}"
        plans = f"{r['ours_planned']:,} / {r.get('et_planned', 0):,}"
        et_ratio = f"{r['et_ms'] / r['eager_ms']:.2f}x" if "et_ms" in r else "-"
        print(f"{r['model']:<20} {sizes:>26} {plans:>24} {r['eager_ms']:>9.2f} "
              f"{r['ours_ms'] / r['eager_ms']:>9.2f}x {et_ratio:>9}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
