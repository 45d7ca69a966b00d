"""Long-run (soak) check of the runtime: memory stays flat, nothing leaks. Not in the test suite.

    nice -n 19 python scripts/soak.py                     # the full run (issue 13, item 5)
    python scripts/soak.py --small-calls 2000 --mnv2-calls 20 --loads 50   # a quick look

1. ``execute`` a small model (tiny_classifier) ``--small-calls`` times and MobileNetV2
   ``--mnv2-calls`` times, each on one loaded Method: RSS after a warm-up and at the end must
   agree within ``--rss-tolerance`` (5%).
2. Load and drop a program (from a path, so it is memory-mapped) ``--loads`` times, with a
   ``load_method`` + ``execute`` each time: the open file descriptors (``/proc/self/fd``) and the
   memory mappings (``/proc/self/maps``, and those of the .pte file itself) must not grow.

The .pte files are exported with edgetorch (needs torch) into ``--pte-dir`` unless already there.
Prints one line per phase and exits non-zero when a limit is broken.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from edgetorch.runtime import Runtime


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def maps(path: Path | None = None) -> int:
    with open("/proc/self/maps") as f:
        lines = f.readlines()
    if path is None:
        return len(lines)
    return sum(str(path) in line for line in lines)


def export(name: str, out: Path) -> Path:
    """``out/<name>.pte``, exported in a child process so this one never imports torch (its
    RSS is then the runtime's own)."""
    pte = out / f"{name}.pte"
    if not pte.exists():
        code = ("import sys, torch; from edgetorch.examples import get_example; "
                "from edgetorch.exir import to_edge; ex = get_example(sys.argv[1]); "
                "et = to_edge(torch.export.export(ex.factory(), ex.example_inputs())).to_executorch(); "
                "open(sys.argv[2], 'wb').write(et.buffer)")
        subprocess.run([sys.executable, "-W", "ignore", "-c", code, name, str(pte)], check=True)
    return pte


def inputs_for(method) -> list[np.ndarray]:
    from edgetorch.schema.scalar_type import to_numpy_dtype

    meta = method.metadata
    rng = np.random.default_rng(0)
    out = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        out.append(rng.standard_normal(info.sizes()).astype(to_numpy_dtype(info.dtype())))
    return out


def soak_execute(pte: Path, calls: int, tolerance: float, label: str) -> dict:
    method = Runtime.get().load_program(pte).load_method("forward")
    x = inputs_for(method)
    first = method.execute(x)
    warmup = max(10, calls // 100)
    for _ in range(warmup):
        method.execute(x)
    gc.collect()
    start_rss, t0 = rss_bytes(), time.perf_counter()
    samples = []
    for k in range(calls):
        out = method.execute(x)
        if (k + 1) % max(1, calls // 10) == 0:
            samples.append(rss_bytes())
    seconds = time.perf_counter() - t0
    gc.collect()
    end_rss = rss_bytes()
    same = all(np.array_equal(a, b) for a, b in zip(out, first))
    growth = (end_rss - start_rss) / start_rss
    return {"phase": f"execute {label}", "calls": calls, "seconds": round(seconds, 1),
            "calls_per_s": round(calls / seconds, 1), "rss_start_mb": round(start_rss / 2**20, 1),
            "rss_end_mb": round(end_rss / 2**20, 1), "rss_growth_pct": round(100 * growth, 2),
            "rss_samples_mb": [round(s / 2**20, 1) for s in samples],
            "last_output_equals_first": same, "ok": abs(growth) <= tolerance and same}


def soak_load(pte: Path, loads: int) -> dict:
    def once():
        program = Runtime.get().load_program(pte)
        method = program.load_method("forward")
        method.execute(inputs_for(method))

    once()
    gc.collect()
    before = {"fds": open_fds(), "maps": maps(), "file_maps": maps(pte), "rss": rss_bytes()}
    t0 = time.perf_counter()
    for _ in range(loads):
        once()
    gc.collect()
    seconds = time.perf_counter() - t0
    after = {"fds": open_fds(), "maps": maps(), "file_maps": maps(pte), "rss": rss_bytes()}
    ok = (after["fds"] <= before["fds"] and after["maps"] <= before["maps"]
          and after["file_maps"] <= before["file_maps"])
    return {"phase": f"load/unload {pte.name}", "loads": loads, "seconds": round(seconds, 1),
            "fds": [before["fds"], after["fds"]], "maps": [before["maps"], after["maps"]],
            "pte_file_maps": [before["file_maps"], after["file_maps"]],
            "rss_mb": [round(before["rss"] / 2**20, 1), round(after["rss"] / 2**20, 1)], "ok": ok}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small-calls", type=int, default=100_000)
    ap.add_argument("--mnv2-calls", type=int, default=1_000)
    ap.add_argument("--loads", type=int, default=1_000)
    ap.add_argument("--rss-tolerance", type=float, default=0.05)
    ap.add_argument("--pte-dir", type=Path, default=Path("build/soak"))
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    args.pte_dir.mkdir(parents=True, exist_ok=True)
    small = export("tiny_classifier", args.pte_dir).resolve()
    assert "torch" not in sys.modules, "the soak measures the runtime alone"
    results = []
    if args.small_calls:
        results.append(soak_execute(small, args.small_calls, args.rss_tolerance, small.stem))
        print(json.dumps(results[-1]), flush=True)
    if args.mnv2_calls:
        mnv2 = export("mobilenet_v2", args.pte_dir).resolve()
        results.append(soak_execute(mnv2, args.mnv2_calls, args.rss_tolerance, mnv2.stem))
        print(json.dumps(results[-1]), flush=True)
    if args.loads:
        results.append(soak_load(small, args.loads))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    bad = [r["phase"] for r in results if not r["ok"]]
    print("soak: OK" if not bad else f"soak: FAILED {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
