"""``edgetorch quant``: ``debug`` (per-layer accuracy across stages), ``mixed`` (automatic mixed
precision) and ``sweep`` (recipe grid, local processes or Ray). The model is a built-in example
or ``path/to/file.py:factory``; the data a folder of ``.npy`` files (see :mod:`.data`)."""

from __future__ import annotations

import argparse


def add_quant_parser(sub: argparse._SubParsersAction) -> None:
    quant = sub.add_parser("quant", help="quantization: per-layer debugging, mixed precision, "
                                         "recipe sweeps")
    cmds = quant.add_subparsers(dest="quant_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help="a built-in example name, or path/to/file.py:factory")
        p.add_argument("--data", required=True, metavar="DIR",
                       help="folder of .npy inputs (k files per sample for k inputs, or stacked "
                            "batches)")
        p.add_argument("--labels", metavar="FILE.npy", help="one target per sample (top1)")
        p.add_argument("--calibration", metavar="DIR",
                       help="calibrate on these .npy files (default: the first 32 samples)")
        p.add_argument("--max-samples", type=int, default=None)

    d = cmds.add_parser("debug", help="per-layer SQNR / cosine / saturation across float, "
                                      "fake-quant, Edge, portable and backend stages")
    common(d)
    d.add_argument("--recipe", default="xnnpack:static",
                   help="backend:scheme[:pc|pt|gN] (xnnpack:static, xnnpack:dynamic:pt, "
                        "xnnpack:8da4w:g64, portable:static, ethos-u55-128:static)")
    d.add_argument("-o", "--output", default="quant-debug.html", help="the HTML report")
    d.add_argument("--csv", help="also write the per-layer table here")
    d.add_argument("--plot", help="also write the SQNR plot here (.png or .svg)")
    d.set_defaults(fn=_cmd_debug)

    m = cmds.add_parser("mixed", help="the fewest modules to keep float for a target")
    common(m)
    m.add_argument("--recipe", default="xnnpack:static")
    m.add_argument("--target", required=True,
                   help="e.g. 'top1_drop<=1' (needs --labels) or 'cosine>=0.99'")
    m.set_defaults(fn=_cmd_mixed)

    s = cmds.add_parser("sweep", help="score a grid of recipes; Pareto front, HTML report")
    common(s)
    s.add_argument("--metric", default="top1", choices=["top1", "cosine", "sqnr"])
    s.add_argument("--recipes", help="comma-separated recipes (default: the standard grid)")
    s.add_argument("-o", "--output", default="quant-sweep", metavar="DIR",
                   help="results folder (a rerun resumes it)")
    s.add_argument("--workers", type=int, default=None,
                   help="local worker processes (default 2; 0 runs in this process)")
    s.add_argument("--ray", metavar="auto|ADDRESS", help="run the candidates on Ray")
    s.add_argument("--retry-failed", action="store_true", help="rerun failed candidates")
    s.add_argument("--qat-train", metavar="FILE.py:FUNCTION",
                   help="a QAT fine-tune, fn(prepared_module, calibration_samples): adds the "
                        "qat recipes to the default grid (or name xnnpack:qat in --recipes)")
    s.set_defaults(fn=_cmd_sweep)


def _load(args: argparse.Namespace):
    from ...examples import load_model_spec

    return load_model_spec(args.model)


def _cmd_debug(args: argparse.Namespace) -> int:
    from .debugger import debug_quantization

    model, inputs = _load(args)
    report = debug_quantization(model, inputs, args.data, args.recipe,
                                calibration=args.calibration, targets=args.labels,
                                max_samples=args.max_samples)
    print(report)
    ranked = report.ranking()
    if not ranked.empty:
        print(f"worst layers at {ranked.iloc[0].stage}:")
        for row in ranked.head(5).itertuples():
            print(f"  {row.layer:<24} {row.module:<24} {row.source:<28} SQNR "
                  f"{row.sqnr_db:7.2f} dB (isolated {row.isolated_sqnr_db:7.2f}, local drop "
                  f"{row.local_drop_db:7.2f})")
    report.to_html(args.output)
    print(f"wrote {args.output}")
    if args.csv:
        report.table.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    if args.plot:
        report.plot(args.plot)
        print(f"wrote {args.plot}")
    return 0


def _cmd_mixed(args: argparse.Namespace) -> int:
    from .auto_mixed_precision import mixed_precision

    model, inputs = _load(args)
    result = mixed_precision(model, inputs, args.data, args.target, args.recipe,
                             calibration=args.calibration, targets=args.labels,
                             max_samples=args.max_samples)
    print(result)
    return 0 if result.met else 1


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .recipe_sweep import sweep

    _, inputs = _load(args)
    recipes = [r for r in args.recipes.split(",") if r] if args.recipes else None
    # the spec string travels to the workers, which build the model themselves
    result = sweep(args.model, inputs, args.data, recipes, metric=args.metric,
                   out_dir=args.output, calibration=args.calibration, targets=args.labels,
                   workers=args.workers, ray=args.ray, max_samples=args.max_samples,
                   retry_failed=args.retry_failed, qat_train=args.qat_train)
    cols = ["key", "status", "metric", "pte_kib", "planned_bytes", "latency_ratio"]
    print(result.table[[c for c in cols if c in result.table.columns]].to_string(index=False))
    print("Pareto front:", ", ".join(result.front.key))
    print(f"wrote {result.folder}/results.csv, pareto.csv, report.html")
    return 0
