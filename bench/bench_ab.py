"""Two source trees of edgetorch A/B in ONE process: load time and per-call time, interleaved.

    .venv/bin/python bench/bench_ab.py --a /tmp/base/src --b src [--rounds 7] [--minilm]
        [--et build/et-files] [models ...]

Both trees are imported into this process, each under its own snapshot of ``sys.modules``
(``Tree.active()`` puts a tree's ``edgetorch`` modules in place while it runs, so the lazy
imports inside either resolve to its own files). Every example is exported by each tree's
own compiler (portable, and lowered to XNNPACK), and, with ``--et DIR``, ExecuTorch's
files found there (``<model>.portable.pte``, ``<model>.xnnpack.pte``) run too, on both trees. Then rounds alternate:

* load: ``load_program`` + ``load_method`` of every file, A then B (B then A on odd rounds),
  and that fresh method's first call (work a tree moves from the first call into the load,
  such as planning or mapping memory, shows in the load alone, not in load + first call);
* per call: a batch of about 0.1 s of eager PyTorch, of tree A's method and of tree B's;
* paired: one call of A and one of B back to back, many times (the median of B / A is the
  figure least moved by the machine's speed changing within seconds).

Prints a Markdown table (load ms A / B, load + first call ms A / B, per call ratio to eager A / B, paired B / A) and
writes ``--json``. One thread everywhere (NumPy's BLAS and torch). ``--cpu`` times with this
thread's CPU time instead of the wall clock: on a machine shared with other work, a call longer
than a scheduler slice is mostly other processes' time on the wall clock.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

for _k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_k, None)
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Both trees as users get them (every load pass), their compiled kernels ready before anything
# is timed (a background warm-up would defer the passes past the first timed loads).
os.environ.pop("EDGETORCH_OPTIMIZE", None)
os.environ.setdefault("EDGETORCH_ACCEL_WARMUP", "wait")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

MODELS = ["tiny_classifier", "mlp", "cnn", "mobilenet_v2", "transformer_encoder",
          "bert_encoder", "llama_decoder"]
BATCH_SECONDS = 0.1
clock = time.perf_counter  # time.thread_time with --cpu


class Tree:
    """One ``src`` directory's edgetorch, imported once, put in place by ``active()``."""

    def __init__(self, label: str, src: Path) -> None:
        self.label, self.src = label, src.resolve()
        self.modules: dict[str, object] = {}
        with self.active():
            import edgetorch.runtime  # noqa: F401

            mod = sys.modules["edgetorch"]
            assert Path(mod.__file__).resolve().is_relative_to(self.src), mod.__file__

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        for k in [k for k in sys.modules if k == "edgetorch" or k.startswith("edgetorch.")]:
            del sys.modules[k]
        sys.modules.update(self.modules)
        sys.path.insert(0, str(self.src))
        try:
            yield
        finally:
            sys.path.remove(str(self.src))
            self.modules = {k: v for k, v in sys.modules.items()
                            if k == "edgetorch" or k.startswith("edgetorch.")}

    def export(self, names: list[str], out: Path, minilm: bool) -> None:
        """Each example's files by this tree's compiler, in a process of its own (torch
        registers the compiler's operator libraries once per process)."""
        env = dict(os.environ, PYTHONPATH=str(self.src))
        subprocess.run([sys.executable, __file__, "--export-to", str(out), "--tree", self.label,
                        *(["--minilm"] if minilm else []), *names], env=env, check=True)

    def load(self, path: Path, args: list[np.ndarray] | None = None) -> tuple[object, float, float]:
        """(method, seconds of the load, seconds of the load and ``args``' first call), timed
        with this tree's modules already in place."""
        with self.active():
            from edgetorch.runtime import Runtime

            t0 = clock()
            m = Runtime.get().load_program(path).load_method("forward")
            t1 = clock()
            if args is not None:
                m.execute(args)
            return m, t1 - t0, clock() - t0


def export(names: list[str], out: Path, label: str, minilm: bool) -> int:
    """(In the tree's own process.) ``<model>.<path>.<label>.pte`` for every example."""
    from edgetorch.examples import get_example
    from edgetorch.exir import to_edge, to_edge_transform_and_lower

    def lower(model, inputs, xnnpack: bool) -> bytes:
        ep = torch.export.export(model, inputs)
        if xnnpack:
            from edgetorch.backends.xnnpack import XnnpackPartitioner

            return to_edge_transform_and_lower(
                ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
        return to_edge(ep).to_executorch().buffer

    models = [(n, *get_example(n).build()) for n in names]
    if minilm:
        from edgetorch.examples.minilm import minilm as build

        models.append(("minilm", *build()))
    for name, model, inputs in models:
        for path in ("portable", "xnnpack"):
            (out / f"{name}.{path}.{label}.pte").write_bytes(
                lower(model, inputs, path == "xnnpack"))
    return 0


def _time(fn, n: int, tree: Tree | None = None) -> float:
    """Seconds per call of ``fn`` over ``n`` calls, ``tree``'s modules in place (untimed)."""
    with tree.active() if tree is not None else contextlib.nullcontext():
        t0 = clock()
        for _ in range(n):
            fn()
        return (clock() - t0) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", type=Path)
    p.add_argument("--b", type=Path)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--minilm", action="store_true", help="MiniLM load times too")
    p.add_argument("--et", type=Path, help="directory of ExecuTorch-exported <model>.<path>.pte files")
    p.add_argument("--json", type=Path)
    p.add_argument("--cpu", action="store_true", help="time with this thread's CPU time")
    p.add_argument("models", nargs="*", default=MODELS)
    p.add_argument("--export-to", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--tree", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.export_to:
        return export(a.models, a.export_to, a.tree, a.minilm)
    global clock
    if a.cpu:
        clock = time.thread_time
    torch.set_num_threads(1)
    import threadpoolctl

    threadpoolctl.threadpool_limits(limits=1)
    trees = [Tree("A", a.a), Tree("B", a.b)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    for t in trees:
        t.export(a.models, tmp, a.minilm)
    # (row name, eager callable or None, inputs, {tree: file})
    rows: list[tuple[str, object, list[np.ndarray], dict[str, Path]]] = []
    from edgetorch.examples import get_example  # torch-only package: either tree's will do

    for name in a.models:
        ex = get_example(name)
        model, inputs = ex.factory(), ex.example_inputs()

        def eager(model=model, inputs=inputs):
            with torch.inference_mode():
                return model(*inputs)
        args = [x.numpy() for x in inputs]
        for path in ("portable", "xnnpack"):
            rows.append((f"{name} {path}", eager, args,
                         {t.label: tmp / f"{name}.{path}.{t.label}.pte" for t in trees}))
        for path in ("portable", "xnnpack"):
            et = a.et / f"{name}.{path}.pte" if a.et else None
            if et is not None and et.exists():
                rows.append((f"{name} {path} (ET's file)", eager, args, {"A": et, "B": et}))
    if a.minilm:
        from edgetorch.examples.minilm import minilm

        _, inputs = minilm()
        for path in ("portable", "xnnpack"):
            rows.append((f"minilm {path}", None, [x.numpy() for x in inputs],
                         {t.label: tmp / f"minilm.{path}.{t.label}.pte" for t in trees}))
    gc.collect()
    result = {"a": str(a.a), "b": str(a.b), "rounds": a.rounds, "rows": {},
              "clock": "thread CPU time" if a.cpu else "wall clock"}
    for name, eager, args, files in rows:
        methods = {t.label: t.load(files[t.label])[0] for t in trees}
        calls, owner, outs = {}, {t.label: t for t in trees}, {}
        for t in trees:
            m = methods[t.label]
            with t.active():
                outs[t.label] = m.execute(args)
            calls[t.label] = (lambda m=m, args=args: m.execute(args))
        for g, w in zip(outs["B"], outs["A"]):  # (the passes may round differently, not more)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name)
        if eager is not None:
            eager()
            calls["eager"] = eager
        n = {k: max(1, int(BATCH_SECONDS / max(min(_time(c, 1, owner.get(k))
                                                       for _ in range(3)), 1e-7)))
             for k, c in calls.items()}
        per: dict[str, list[float]] = {k: [] for k in calls}
        loads: dict[str, list[float]] = {t.label: [] for t in trees}
        firsts: dict[str, list[float]] = {t.label: [] for t in trees}
        for r in range(a.rounds):
            order = trees if r % 2 == 0 else trees[::-1]
            for t in order:
                gc.collect()
                m, load_s, first_s = t.load(files[t.label], args)
                loads[t.label].append(1e3 * load_s)
                firsts[t.label].append(1e3 * first_s)
                del m
            if eager is None:
                continue
            keys = list(calls) if r % 2 == 0 else list(calls)[::-1]
            for k in keys:
                per[k].append(1e3 * _time(calls[k], n[k], owner.get(k)))
        row = {"load_ms": {k: statistics.median(v) for k, v in loads.items()},
               "load_first_call_ms": {k: statistics.median(v) for k, v in firsts.items()}}
        if eager is not None:
            ms = {k: statistics.median(v) for k, v in per.items()}
            pairs = []
            budget = time.perf_counter() + 2.0
            while len(pairs) < 2000 and (time.perf_counter() < budget or len(pairs) < 20):
                ta = _time(calls["A"], 1, owner["A"])
                tb = _time(calls["B"], 1, owner["B"])
                pairs.append(tb / ta)
            row.update(ms=ms, ratio={k: ms[k] / ms["eager"] for k in ("A", "B")},
                       paired_b_over_a=statistics.median(pairs), pairs=len(pairs))
        result["rows"][name] = row
        print(_line(name, row), flush=True)
        del methods, calls
        gc.collect()
    print("\n" + markdown(result))
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))
    return 0


def _line(name: str, row: dict) -> str:
    s = f"{name}: load A {row['load_ms']['A']:.1f} ms, B {row['load_ms']['B']:.1f} ms"
    first = row["load_first_call_ms"]
    s += f"; load + first call A {first['A']:.1f} ms, B {first['B']:.1f} ms"
    if "ratio" in row:
        s += (f"; per call / eager A {row['ratio']['A']:.2f}x, B {row['ratio']['B']:.2f}x; "
              f"paired B/A {row['paired_b_over_a']:.3f}")
    return s


def markdown(r: dict) -> str:
    lines = [f"A = `{r['a']}`, B = `{r['b']}`; medians of {r['rounds']} interleaved rounds, "
             f"one process, one thread, {r.get('clock', 'wall clock')}.", "",
             "| program | load ms A | load ms B | load + 1st call ms A | load + 1st call ms B "
             "| A / eager | B / eager | paired B / A |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, row in r["rows"].items():
        ratio = row.get("ratio")
        cells = (f"{ratio['A']:.2f}x | {ratio['B']:.2f}x | {row['paired_b_over_a']:.3f}"
                 if ratio else "- | - | -")
        first = row["load_first_call_ms"]
        lines.append(f"| {name} | {row['load_ms']['A']:.1f} | {row['load_ms']['B']:.1f} | "
                     f"{first['A']:.1f} | {first['B']:.1f} | {cells} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
