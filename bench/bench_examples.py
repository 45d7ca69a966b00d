"""edgetorch vs ExecuTorch 1.5.1 vs eager PyTorch: export time, latency, load time, memory.

One command (``make bench``)::

    .venv/bin/python bench/bench_examples.py [models ...] [--rounds 5] [--threads 1,2]

1. exports every model's ``.pte`` files with edgetorch (this venv) and with ExecuTorch (the
   reference venv, ``$EDGETORCH_REF_PYTHON`` or ``.venv-ref``): portable, XNNPACK fp32 and
   XNNPACK static int8 (``export_pte.py``; it also times both toolchains' exports);
2. times every runner in ONE process with interleaved rounds (``measure.py``, run by the
   reference python: eager PyTorch, ExecuTorch's runtime and edgetorch's torch-free runtime);
3. writes ``bench/results/<label>.json``, ``<label>.md`` (tables) and ``<label>.png`` (chart).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "compat"))
from refenv import ref_python  # noqa: E402

MODELS = ["tiny_classifier", "mlp", "cnn", "mobilenet_v2", "resnet18", "transformer_encoder",
          "llama_decoder", "bert_encoder"]
PATHS = ("portable", "xnnpack", "xnnpack_q8")
RUNNERS = (("ours:ours", "ours on ours"), ("ours:et", "ours on ET's"),
           ("et:et", "ET on ET's"), ("et:ours", "ET on ours"))


def _run(python: str | Path, args: list[str], src: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run([str(python), *args], env=env, check=True)


def _ratio(row: dict, key: str) -> str:
    r, e = row["runners"].get(key), row["runners"]["eager"]["ms"]
    return f"{r['ms']:.3f} ({r['ms'] / e:.2f}x)" if r else "-"


def _num(d: dict | None, key: str, digits: int = 1) -> str:
    return f"{d[key]:.{digits}f}" if d and key in d else "-"


def markdown(result: dict) -> str:
    lines = [f"# Benchmark {result['label']}", "",
             f"BLAS: {', '.join(str(b.get('internal_api')) + ' ' + str(b.get('version')) + ' core=' + str(b.get('architecture')) for b in result['blas'])}; "
             f"numpy {result['numpy']}, torch {result['torch']}. Milliseconds per call, median of "
             f"{result['rounds']} interleaved rounds in one process; (ratio to eager PyTorch in the "
             "same run). `ours` = edgetorch's runtime, `ET` = ExecuTorch 1.5.1's runtime; "
             "`on ET's` = on the .pte ExecuTorch exported.", ""]
    acc = result.get("accel")
    if acc:
        lines[-1:-1] = [
            "", f"Compiled kernels (edgetorch's optional `accel` extra, numba {acc['numba']}): "
            + (f"on; loops that ran: {', '.join(f'`{c}`' for c in acc['compiled']) or 'none'}."
               if acc["available"] else "off (NumPy paths).")]
    for threads in sorted({r["threads"] for r in result["rows"]}):
        lines += [f"## {threads} thread(s)", "",
                  "| model | path | eager | " + " | ".join(t for _, t in RUNNERS)
                  + " | ours / ET, same file |",
                  "|---|---|---:|" + "---:|" * (len(RUNNERS) + 1)]
        for row in (r for r in result["rows"] if r["threads"] == threads):
            for path in PATHS:
                if not any(f"{path}/{k}" in row["runners"] for k, _ in RUNNERS):
                    continue
                cells = [_ratio(row, f"{path}/{k}") for k, _ in RUNNERS]
                o, t = row["runners"].get(f"{path}/ours:et"), row["runners"].get(f"{path}/et:et")
                cells.append(f"{o['ms'] / t['ms']:.2f}x" if o and t else "-")
                lines.append(f"| {row['model']} | {path} | {row['runners']['eager']['ms']:.3f} | "
                             + " | ".join(cells) + " |")
        lines.append("")
        paired = [(row, k, v) for row in result["rows"] if row["threads"] == threads
                  for k, v in row.get("paired", {}).items()]
        if paired:
            lines += [f"Per call, interleaved ({threads} thread(s)): each runtime once on the same "
                      "file, back to back, repeated; median of the per-pair ratios.", "",
                      "| model | path | file | pairs | ours ms | ET ms | ours / ET |",
                      "|---|---|---|---:|---:|---:|---:|"]
            for row, k, v in paired:
                path, file = k.split("/")[0], {"ours": "ours", "et": "ET's"}[k.split(":")[1]]
                lines.append(f"| {row['model']} | {path} | {file} | {v['pairs']} | "
                             f"{v['ours_ms']:.3f} | {v['et_ms']:.3f} | {v['median_ratio']:.2f}x |")
            lines.append("")
    lines += ["## Load (load_program + load_method, ms) and RSS growth over load + first call (MB)",
              "", "| model | path | .pte MB ours / ET | load ours on ours | load ET on ET's | "
              "RSS ours on ours | RSS ET on ET's |", "|---|---|---|---:|---:|---:|---:|"]
    for row in (r for r in result["rows"] if r["threads"] == 1):
        for path in PATHS:
            o, t = row["runners"].get(f"{path}/ours:ours"), row["runners"].get(f"{path}/et:et")
            if not o and not t:
                continue
            lines.append(f"| {row['model']} | {path} | {_num(o, 'pte_mb', 2)} / {_num(t, 'pte_mb', 2)} | "
                         f"{_num(o, 'load_ms')} | {_num(t, 'load_ms')} | {_num(o, 'rss_mb')} | {_num(t, 'rss_mb')} |")
    lines += ["", "## Export: to_edge + to_executorch (s), XNNPACK: lowering + to_executorch (s)",
              "", "| model | portable ours | portable ET | xnnpack ours | xnnpack ET | "
              "int8 xnnpack ours | int8 xnnpack ET |", "|---|---:|---:|---:|---:|---:|---:|"]
    exp = result["export"]
    for m in result["models"]:
        cells = []
        for path in PATHS:
            for tool in ("edgetorch", "executorch"):
                v = exp.get(tool, {}).get(m, {}).get(f"{path}_export_s")
                cells.append(f"{v:.2f}" if v is not None else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    errors = [(r["model"], k, v) for r in result["rows"] for k, v in r["errors"].items()]
    errors += [(m, f"export {tool} {k}", v) for tool, d in exp.items() for m, row in d.items()
               for k, v in row.items() if k.endswith("_error")]
    if errors:
        lines += ["", "## Gaps", ""] + [f"- {m} {k}: {v}" for m, k, v in errors]
    lines.append("\nPeak RSS of the measuring process: "
                 f"{max(r.get('peak_rss_mb', 0) for r in result['rows']):.0f} MB.")
    if result.get("note"):
        lines.append(f"\nNote: {result['note']}.")
    return "\n".join(lines) + "\n"


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r["threads"] == 1]
    series = [(f"{p}/{k}", f"{p} {t}") for p in PATHS for k, t in RUNNERS[:3]]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(rows)), 5))
    width = 0.8 / len(series)
    for j, (key, label) in enumerate(series):
        xs, ys = [], []
        for i, r in enumerate(rows):
            if key in r["runners"]:
                xs.append(i + j * width)
                ys.append(r["runners"][key]["ms"] / r["runners"]["eager"]["ms"])
        ax.bar(xs, ys, width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))], [r["model"] for r in rows],
                  rotation=20)
    ax.set_ylabel("time / eager PyTorch (log, lower is better)")
    ax.set_title(f"edgetorch vs ExecuTorch 1.5.1, 1 thread ({result['label']})")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--label", default=time.strftime("bench-%Y-%m-%d-%H%M"))
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="edgetorch sources to use")
    parser.add_argument("--export", choices=["all", "ours", "none"], default="all",
                        help="which .pte files to (re)export into --work; ExecuTorch's do not "
                        "depend on edgetorch's code, so 'ours' reuses them")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--multi-thread-models", default="",
                        help="comma-separated models for the multi-thread passes (default: all)")
    parser.add_argument("--render-only", action="store_true",
                        help="only write the tables and chart from --work's measure.json")
    args = parser.parse_args()
    ref = ref_python()
    if not ref.exists():
        print(f"the reference environment ({ref}) is missing: run `make ref` first")
        return 1
    here = Path(__file__).resolve().parent
    if args.export != "none" and not args.render_only:
        _run(sys.executable, [str(here / "export_pte.py"), "--tool", "edgetorch", "--out",
                              str(args.work), *args.models], args.src)
    if args.export == "all" and not args.render_only:
        _run(ref, [str(here / "export_pte.py"), "--tool", "executorch", "--out", str(args.work),
                   *args.models], args.src)
    measured = args.work / "measure.json"
    if not args.render_only:
        _run(ref, [str(here / "measure.py"), "--pte-dir", str(args.work), "--json", str(measured),
                   "--rounds", str(args.rounds), "--threads", args.threads,
                   "--multi-thread-models", args.multi_thread_models, *args.models], args.src)
    result = json.loads(measured.read_text())
    result.update(label=args.label, rounds=args.rounds, models=args.models, export={
        tool: json.loads((args.work / tool / "export.json").read_text())
        for tool in ("edgetorch", "executorch") if (args.work / tool / "export.json").exists()})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.label}.json").write_text(json.dumps(result, indent=2))
    (args.out / f"{args.label}.md").write_text(markdown(result))
    chart(result, args.out / f"{args.label}.png")
    print(markdown(result))
    print(f"wrote {args.out / args.label}.json, .md, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
