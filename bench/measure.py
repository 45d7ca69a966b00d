"""Time every runner of every model in ONE process with interleaved rounds.

Runs under the reference environment's python (torch + ExecuTorch 1.5.1's runtime) with
edgetorch's ``src`` on ``PYTHONPATH``; from edgetorch it imports only ``edgetorch.runtime``
(torch-free NumPy) and ``edgetorch.examples`` (torch, for the eager model). The ``.pte`` files
come from ``export_pte.py``. Runners per model and path (portable, xnnpack, xnnpack_q8):

* ``eager``: the PyTorch module under ``torch.inference_mode``,
* ``ours:ours`` / ``ours:et``: edgetorch's runtime on edgetorch's / ExecuTorch's ``.pte``,
* ``et:et`` / ``et:ours``: ExecuTorch's runtime (pybindings) on its own / edgetorch's ``.pte``.

A round runs every runner once, in an order rotated each round, for a batch of calls sized at
warm-up (about 0.1 s, at least one call); the per-call time of a runner is the median over
rounds (a runner of several seconds per call stops after 15 s and at least two rounds). Load time is the median of three ``load_program`` + ``load_method``; ``rss_mb`` is the
resident-set growth over the first load and first execute (approximate: pages are shared).

This machine sets ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` for old OpenBLAS builds, which
forces NumPy's OpenBLAS onto a slower kernel; as on a user's machine, this process drops both
(re-executing itself before NumPy is imported) and prints the BLAS core in use.
"""

from __future__ import annotations

import os
import sys

_FORCED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(k in os.environ for k in _FORCED) and __name__ == "__main__":
    env = {k: v for k, v in os.environ.items() if k not in _FORCED}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402
import torch  # noqa: E402

from edgetorch.examples import get_example  # noqa: E402
from edgetorch.runtime import Runtime as OurRuntime  # noqa: E402

PATHS = ("portable", "xnnpack", "xnnpack_q8")
RUNNERS = ("ours:ours", "ours:et", "et:et", "et:ours")
BATCH_SECONDS = 0.1
SLOW_BUDGET_SECONDS = 15.0
PAIRS, PAIR_SECONDS = 2000, 2.0  # per-call pairs of ours and ExecuTorch's on the same file


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _et_runtime():
    from executorch.runtime import Runtime

    return Runtime.get()


def set_threads(n: int) -> None:
    threadpoolctl.threadpool_limits(limits=n)  # NumPy's BLAS (edgetorch) and torch's pools
    torch.set_num_threads(n)
    from executorch.extension.pybindings import portable_lib

    portable_lib._unsafe_reset_threadpool(n)  # ExecuTorch's XNNPACK threadpool


def _loader(runtime: str, pte: Path):
    if runtime == "ours":
        return lambda: OurRuntime.get().load_program(pte).load_method("forward")  # mmap
    et = _et_runtime()
    return lambda: et.load_program(pte).load_method("forward")


def make_runner(key: str, pte: Path, inputs: list[torch.Tensor]) -> dict:
    runtime = key.split(":")[0]
    load = _loader(runtime, pte)
    gc.collect()
    rss0 = _rss_mb()
    method = load()
    args = [x.numpy() for x in inputs] if runtime == "ours" else list(inputs)
    t0 = time.perf_counter()
    method.execute(args)
    first = time.perf_counter() - t0
    rss = _rss_mb() - rss0
    loads = []
    for _ in range(3):
        t0 = time.perf_counter()
        m = load()
        loads.append(time.perf_counter() - t0)
        del m
    def call():
        return method.execute(args)

    # The first call pays one-time costs (a numba kernel's import and compile: seconds), and
    # so may the second (first-touch pages): batches are sized from the fastest of a few more
    # calls. A batch sized from one slow call held a few calls a round, each paying the cold
    # caches left by the other runners: the same program measured 1.5-4x apart depending on
    # which runner came first (transformer_encoder, ours on ours vs ours on ET's, session 4).
    if first < 5.0:
        spent, times = 0.0, []
        while len(times) < 5 and (spent < 0.5 or len(times) < 2):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
            spent += times[-1]
        first = min(times)
    return {"call": call, "load_ms": 1e3 * statistics.median(loads), "rss_mb": rss,
            "first_s": first}


def _paired(runners: dict[str, dict]) -> dict[str, dict]:
    """Both runtimes on the same file, one call each, back to back, many times: the median of
    the per-pair ratios (ours / ExecuTorch's). Each pair sees the machine in nearly the same
    state, which the 0.1 s batches of the rounds do not on a shared 2-core VM whose speed
    moves within seconds (our runtime's batches of one program measured 0.25-0.51 ms a few
    seconds apart while ExecuTorch's moved 0.15-0.25)."""
    out = {}
    for key in runners:
        path, _, pair = key.partition("/")
        if not pair.startswith("ours:"):
            continue
        theirs = runners.get(f"{path}/et:{pair.split(':')[1]}")
        if theirs is None:
            continue
        ours = runners[key]
        per_pair = ours["first_s"] + theirs["first_s"]
        n = max(10, min(PAIRS, int(PAIR_SECONDS / max(per_pair, 1e-7))))
        ratios, mine, their = [], [], []
        for _ in range(n):
            t0 = time.perf_counter()
            ours["call"]()
            t1 = time.perf_counter()
            theirs["call"]()
            t2 = time.perf_counter()
            ratios.append((t1 - t0) / (t2 - t1))
            mine.append(t1 - t0)
            their.append(t2 - t1)
        out[key] = {"pairs": n, "median_ratio": statistics.median(ratios),
                    "ours_ms": 1e3 * statistics.median(mine),
                    "et_ms": 1e3 * statistics.median(their)}
    return out


def _batch_size(seconds: float) -> int:
    return max(1, min(1000, int(BATCH_SECONDS / max(seconds, 1e-7))))


def measure_model(name: str, pte_dir: Path, rounds: int, threads: int) -> dict:
    ex = get_example(name)
    model, inputs = ex.factory(), list(ex.example_inputs())
    runners: dict[str, dict] = {}

    def eager():
        with torch.inference_mode():
            return model(*inputs)

    eager()
    t0 = time.perf_counter()
    eager()
    runners["eager"] = {"call": eager, "first_s": time.perf_counter() - t0}
    errors = {}
    for path in PATHS:
        for key in RUNNERS:
            if threads > 1 and key in ("et:et", "et:ours") and path == "portable":
                continue  # ExecuTorch's portable kernels are single-threaded
            tool = {"ours": "edgetorch", "et": "executorch"}[key.split(":")[1]]
            pte = pte_dir / tool / f"{name}.{path}.pte"
            if not pte.exists():
                continue
            try:
                runners[f"{path}/{key}"] = make_runner(key, pte, inputs)
            except Exception as e:  # e.g. a kernel one runtime lacks: shown as a gap
                errors[f"{path}/{key}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    sizes = {k: _batch_size(r["first_s"]) for k, r in runners.items()}
    samples: dict[str, list[float]] = {k: [] for k in runners}
    keys = list(runners)
    for rnd in range(rounds):
        order = keys[rnd % len(keys):] + keys[:rnd % len(keys)]
        for k in order:
            if len(samples[k]) >= 2 and sum(samples[k]) > 1e3 * SLOW_BUDGET_SECONDS:
                continue  # a multi-second runner (ExecuTorch portable on a CNN): fewer rounds
            call, n = runners[k]["call"], sizes[k]
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            samples[k].append((time.perf_counter() - t0) / n * 1e3)
    row: dict = {"model": name, "threads": threads, "errors": errors, "runners": {},
                 "paired": _paired(runners)}
    for k, r in runners.items():
        row["runners"][k] = {"ms": statistics.median(samples[k]), "rounds": len(samples[k]),
                             "calls_per_round": sizes[k],
                             **{f: r[f] for f in ("load_ms", "rss_mb") if f in r}}
        if k != "eager":
            pte = pte_dir / {"ours": "edgetorch", "et": "executorch"}[k.split(":")[-1]] / \
                f"{name}.{k.split('/')[0]}.pte"
            row["runners"][k]["pte_mb"] = pte.stat().st_size / 2**20
    row["peak_rss_mb"] = _peak_mb()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pte-dir", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--multi-thread-models", default="",
                        help="comma-separated models for the passes with more than one thread "
                        "(default: all)")
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    multi = [m for m in args.multi_thread_models.split(",") if m] or args.models
    blas = [p for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]
    for p in blas:
        print(f"BLAS: {p.get('internal_api')} {p.get('version')} core={p.get('architecture')} "
              f"({p.get('filepath')})", flush=True)
    out = {"blas": [{k: p.get(k) for k in ("internal_api", "version", "architecture",
                                           "num_threads", "filepath")} for p in blas],
           "numpy": np.__version__, "torch": torch.__version__, "rows": []}
    from edgetorch.kernels import accel

    numba = importlib.util.find_spec("numba")
    out["accel"] = {"available": accel.available(), "numba": numba and
                    importlib.metadata.version("numba"), "compiled": []}
    print(f"compiled kernels (accel extra): {out['accel']}", flush=True)
    for threads in [int(t) for t in args.threads.split(",")]:
        set_threads(threads)
        for name in (args.models if threads == 1 else multi):
            row = measure_model(name, args.pte_dir, args.rounds, threads)
            out["rows"].append(row)
            out["accel"]["compiled"] = _compiled_kernels()
            print(f"[{threads} thread(s)] {name}: " + ", ".join(
                f"{k} {v['ms']:.3f} ms" for k, v in row["runners"].items()), flush=True)
            args.json.write_text(json.dumps(out, indent=2))  # after every model: partial runs count
    return 0


def _compiled_kernels() -> list[str]:
    """edgetorch's numba loops that have run in this process (the accel path was taken)."""
    from edgetorch.kernels.accel import LazyJit

    return sorted(f"{m}.{k}" for m, mod in list(sys.modules.items())
                  if m.startswith("edgetorch") for k, v in vars(mod).items()
                  if isinstance(v, LazyJit) and v._compiled is not None)


if __name__ == "__main__":
    sys.exit(main())
