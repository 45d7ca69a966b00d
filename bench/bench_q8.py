"""XNNPACK per-call time of two edgetorch trees and ExecuTorch's runtime, in ONE process.

    .venv-ref/bin/python bench/bench_q8.py --a /tmp/base/src --b src \\
        --q8 build/bench/executorch --fp32 build/bench/executorch [--rounds 9] [models ...]

Runs under the reference environment's python (ExecuTorch 1.5.1's runtime pybindings); both
trees are imported as in ``bench_ab.py`` (each under its own snapshot of ``sys.modules``).
Every row is one of ExecuTorch's files (``<model>.xnnpack_q8.pte`` from ``--q8``,
``<model>.xnnpack.pte`` from ``--fp32``) run by tree A, tree B and ExecuTorch's runtime:

* rounds: a batch of about 0.05 s of each runner, in an order rotated each round; the median
  of the per-call times;
* paired: A, B and ExecuTorch once each, back to back, many times; the medians of the
  per-triple ratios B / A and B / ExecuTorch (the figures least moved by the machine's speed
  changing within seconds).

One thread everywhere; ``--cpu`` times with this thread's CPU time. A and B must give the same
outputs, and on int8 files the same bytes as ExecuTorch. Prints the BLAS core and the load
average before and after; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

for _k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # (read when NumPy loads OpenBLAS)
    os.environ.pop(_k, None)
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402
import torch  # noqa: E402
from bench_ab import Tree  # noqa: E402  (one thread, compiled kernels warmed up first)

MODELS = ["tiny_classifier", "mlp", "cnn", "mobilenet_v2", "resnet18"]
BATCH_SECONDS = 0.05
clock = time.perf_counter


def _batch(fn, n: int, tree: Tree | None) -> float:
    if tree is None:
        t0 = clock()
        for _ in range(n):
            fn()
        return (clock() - t0) / n
    with tree.active():
        t0 = clock()
        for _ in range(n):
            fn()
        return (clock() - t0) / n


def measure(name: str, pte: Path, trees: list[Tree], rounds: int, exact: bool) -> dict:
    from executorch.runtime import Runtime as EtRuntime

    from edgetorch.examples import get_example

    inputs = list(get_example(name).example_inputs())
    args = [x.numpy() for x in inputs]
    et = EtRuntime.get().load_program(pte).load_method("forward")
    calls = {"ET": lambda: et.execute(inputs)}
    owner: dict[str, Tree | None] = {"ET": None}
    outs = {"ET": np.asarray(et.execute(inputs)[0])}
    for t in trees:
        m = t.load(pte)
        with t.active():
            outs[t.label] = np.array(m.execute(args)[0])
        calls[t.label] = (lambda m=m: m.execute(args))
        owner[t.label] = t
    same_ab = bool(np.array_equal(outs["A"], outs["B"]))
    same_et = bool(np.array_equal(outs["B"], outs["ET"]))
    if not same_ab or (exact and not same_et):
        raise SystemExit(f"{name}: outputs differ (A == B: {same_ab}, B == ET: {same_et})")
    n = {k: max(1, int(BATCH_SECONDS / max(min(_batch(c, 1, owner[k]) for _ in range(3)),
                                             1e-7))) for k, c in calls.items()}
    per: dict[str, list[float]] = {k: [] for k in calls}
    keys = list(calls)
    for r in range(rounds):
        for k in keys[r % 3:] + keys[: r % 3]:
            per[k].append(1e3 * _batch(calls[k], n[k], owner[k]))
    ms = {k: statistics.median(v) for k, v in per.items()}
    ba, be = [], []
    budget = time.perf_counter() + 3.0
    while len(ba) < 2000 and (time.perf_counter() < budget or len(ba) < 15):
        ta, tb, te = (_batch(calls[k], 1, owner[k]) for k in ("A", "B", "ET"))
        ba.append(tb / ta)
        be.append(tb / te)
    return {"ms": ms, "b_over_a_rounds": ms["B"] / ms["A"], "b_over_et_rounds": ms["B"] / ms["ET"],
            "a_over_et_rounds": ms["A"] / ms["ET"], "paired_b_over_a": statistics.median(ba),
            "paired_b_over_et": statistics.median(be), "pairs": len(ba),
            "bit_exact_with_et": same_et}


def _exact(path: str, row: dict) -> str:
    if path != "xnnpack_q8":
        return "- (fp32: within rounding)"
    return "yes" if row["bit_exact_with_et"] else "no"


def markdown(r: dict) -> str:
    lines = [f"A = `{r['a']}`, B = `{r['b']}`; BLAS {r['blas']}; {r['clock']}; medians of "
             f"{r['rounds']} interleaved rounds and of the paired calls, one process, one "
             f"thread; load average {r['load_before']} before, {r['load_after']} after.", "",
             "| model | path | A ms | B ms | ET ms | A / ET | B / ET | paired B / A | "
             "paired B / ET | bit-exact with ET |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for key, row in r["rows"].items():
        model, path = key.split(" ")
        ms = row["ms"]
        lines.append(f"| {model} | {path} | {ms['A']:.3f} | {ms['B']:.3f} | {ms['ET']:.3f} | "
                     f"{row['a_over_et_rounds']:.2f}x | {row['b_over_et_rounds']:.2f}x | "
                     f"{row['paired_b_over_a']:.3f} | {row['paired_b_over_et']:.2f}x | "
                     f"{_exact(path, row)} |")
    return "\n".join(lines)


def main() -> int:
    global clock
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", type=Path, required=True)
    p.add_argument("--b", type=Path, required=True)
    p.add_argument("--q8", type=Path, help="directory of ExecuTorch's <model>.xnnpack_q8.pte")
    p.add_argument("--fp32", type=Path, help="directory of ExecuTorch's <model>.xnnpack.pte")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--cpu", action="store_true", help="time with this thread's CPU time")
    p.add_argument("--json", type=Path)
    p.add_argument("models", nargs="*", default=MODELS)
    a = p.parse_args()
    if a.cpu:
        clock = time.thread_time
    torch.set_num_threads(1)
    threadpoolctl.threadpool_limits(limits=1)
    from executorch.extension.pybindings import portable_lib

    portable_lib._unsafe_reset_threadpool(1)
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} core={b.get('architecture')}"
                     for b in threadpoolctl.threadpool_info() if b.get("user_api") == "blas")
    print(f"BLAS: {blas}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}", flush=True)
    result = {"a": str(a.a), "b": str(a.b), "rounds": a.rounds, "blas": blas, "rows": {},
              "clock": "thread CPU time" if a.cpu else "wall clock",
              "load_before": os.getloadavg()}
    print(f"load average {result['load_before']}", flush=True)
    trees = [Tree("A", a.a), Tree("B", a.b)]
    for name in a.models:
        for path, d in (("xnnpack_q8", a.q8), ("xnnpack", a.fp32)):
            pte = d / f"{name}.{path}.pte" if d else None
            if pte is None or not pte.exists():
                continue
            row = measure(name, pte, trees, a.rounds, path == "xnnpack_q8")
            result["rows"][f"{name} {path}"] = row
            print(f"{name} {path}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in row["ms"].items())
                  + f"; paired B/A {row['paired_b_over_a']:.3f}, B/ET "
                  f"{row['paired_b_over_et']:.2f}x", flush=True)
    result["load_after"] = os.getloadavg()
    print("\n" + markdown(result))
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
