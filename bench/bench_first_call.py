"""The first calls of a fresh process against later ones: what compiled kernels cost a new user.

    .venv/bin/python bench/bench_first_call.py [models] [--repeat 3] [--calls 30] [--out DIR]

Exports each model once (edgetorch, XNNPACK-lowered or portable), then, per mode, starts fresh
processes that import only ``edgetorch.runtime``, load the program and time its first calls
and the median of later ones. Modes:

* ``cold``: numba's on-disk cache empty (a new NUMBA_CACHE_DIR): the first process after install;
* ``warm``: the same cache again (every later process);
* ``numpy``: ``EDGETORCH_ACCEL=0``, the NumPy paths only.

Per run: the runtime's import time, load time, calls 1-3, then (edgetorch with the background
warm-up: after waiting for it) three calls that rebuild what the warm-up deferred, then the
median of ``--calls`` steady calls. Figures of merit: ``call 1 / steady`` and the worst of the
first six calls against steady. Each mode runs ``--repeat`` processes; the median run (by
``call 1 / steady``) is reported. Prints a Markdown table; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = {  # name -> (example, lowered to XNNPACK)
    "transformer_encoder/xnnpack": ("transformer_encoder", True),
    "bert_encoder/xnnpack": ("bert_encoder", True),
    "tiny_classifier/xnnpack": ("tiny_classifier", True),
    "cnn/portable": ("cnn", False),
    "llama_decoder/portable": ("llama_decoder", False),
}

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from edgetorch.runtime import Runtime
t1 = time.perf_counter()
method = Runtime.get().load_program(sys.argv[1]).load_method("forward")
t2 = time.perf_counter()
inputs = [a for a in np.load(sys.argv[2]).values()]

def timed(n):
    out = []
    for _ in range(n):
        s = time.perf_counter()
        method.execute(inputs)
        out.append(time.perf_counter() - s)
    return out

early = timed(3)  # a fresh process's first calls
try:  # after the compiled kernels' warm-up (this edgetorch), else right away (before it)
    from edgetorch.kernels import accel
    s = time.perf_counter()
    warm = accel.wait_until_warm() if hasattr(accel, "wait_until_warm") else None
    waited = time.perf_counter() - s
except ImportError:
    warm, waited = None, 0.0
switch = timed(3)  # plans rebuilt and kernels loaded, if the warm-up deferred them
steady = timed(int(sys.argv[3]))
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "calls_s": early + switch,
                  "steady_calls_s": steady, "warm_ready": warm, "waited_s": waited,
                  "torch_loaded": "torch" in sys.modules}))
"""


def export(name: str, xnnpack: bool, directory: Path) -> tuple[Path, Path]:
    import numpy as np
    import torch

    from edgetorch.examples import get_example
    from edgetorch.exir import to_edge, to_edge_transform_and_lower

    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    ep = torch.export.export(model, inputs)
    if xnnpack:
        from edgetorch.backends.xnnpack import XnnpackPartitioner

        prog = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    else:
        prog = to_edge(ep)
    tag = f"{name}.{'xnnpack' if xnnpack else 'portable'}"
    pte, npz = directory / f"{tag}.pte", directory / f"{tag}.npz"
    pte.write_bytes(prog.to_executorch().buffer)
    np.savez(npz, *[t.numpy() for t in inputs])
    return pte, npz


def child(pte: Path, npz: Path, calls: int, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(pte), str(npz), str(calls)],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    c = run["calls_s"]
    run["steady_s"] = statistics.median(run["steady_calls_s"])
    run["first_ratio"] = c[0] / run["steady_s"]
    run["worst_early_ratio"] = max(c) / run["steady_s"]
    return run


def measure(pte: Path, npz: Path, mode: str, repeat: int, calls: int, cache: Path) -> dict:
    """The median (by first-call ratio) of ``repeat`` fresh processes in ``mode``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE",
                                                            "OPENBLAS_L2_SIZE")}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if mode == "numpy":
        env["EDGETORCH_ACCEL"] = "0"
    else:
        env.pop("EDGETORCH_ACCEL", None)
    if mode == "warm":
        env["NUMBA_CACHE_DIR"] = str(cache / "warm")
        child(pte, npz, 4, env)  # fills the cache; not counted
    runs = []
    for i in range(repeat):
        if mode == "cold":
            env["NUMBA_CACHE_DIR"] = str(cache / f"cold{i}")
        runs.append(child(pte, npz, calls, env))
    runs.sort(key=lambda r: r["first_ratio"])
    return runs[len(runs) // 2]


def markdown(results: dict) -> str:
    rows = ["| model | mode | import ms | load ms | call 1 ms | calls 2-3 max ms | "
            "first 3 after warm-up, max ms | steady ms | call 1 / steady | "
            "max of first 6 / steady |", "|" + "---|" * 10]
    for model, modes in results["models"].items():
        for mode, r in modes.items():
            c = r["calls_s"]
            rows.append(f"| {model} | {mode} | {1e3 * r['import_s']:.0f} | "
                        f"{1e3 * r['load_s']:.1f} | {1e3 * c[0]:.2f} | "
                        f"{1e3 * max(c[1:3]):.2f} | {1e3 * max(c[3:]):.2f} | "
                        f"{1e3 * r['steady_s']:.3f} | {r['first_ratio']:.1f} | "
                        f"{r['worst_early_ratio']:.1f} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"some of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--modes", default="cold,warm,numpy")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--label", default=time.strftime("first-call-%Y-%m-%d-%H%M"))
    a = parser.parse_args()
    unknown = set(a.models) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; choose from {', '.join(MODELS)}")
    a.models = a.models or list(MODELS)
    results: dict = {"label": a.label, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        for key in a.models:
            pte, npz = export(*MODELS[key], tmp_path)
            results["models"][key] = {}
            for mode in a.modes.split(","):
                run = measure(pte, npz, mode, a.repeat, a.calls,
                              tmp_path / "numba" / key.replace("/", "_"))
                results["models"][key][mode] = run
                print(key, mode, {k: v for k, v in run.items() if k != "calls_s"}, flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{a.label}.json").write_text(json.dumps(results, indent=2))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
