"""matplotlib figures: SQNR per layer per stage, and a sweep's accuracy against size and
latency with its Pareto front. Drawn with the Agg backend (no display needed)."""

from __future__ import annotations

import io
import math
from typing import Any

from .metrics import SQNR_CAP

STAGE_COLORS = {"float": "#7f7f7f", "fake_quant": "#1f77b4", "edge": "#2ca02c",
                "portable": "#9467bd"}
BACKEND_COLOR = "#d62728"
_NO_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def sqnr_figure(report: Any, ax: Any = None):
    plt = _pyplot()
    if ax is None:
        n = len(report.run.layers)
        fig, ax = plt.subplots(figsize=(min(4 + 0.28 * n, 30), 4.2))
    else:
        fig = ax.figure
    table = report.table
    labels = {la.index: f"{la.name} ({la.module})" if la.module else la.name
              for la in report.run.layers}
    xs = sorted(labels)
    for stage in report.stages:
        if stage == "float":
            continue
        got = dict(zip(table[table.stage == stage]["index"], table[table.stage == stage].sqnr_db))
        if not got:
            continue
        # a layer the stage has no value for (fused into the next one) leaves a gap
        ys = [min(got.get(i, math.nan), SQNR_CAP) for i in xs]
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.2,
                color=STAGE_COLORS.get(stage, BACKEND_COLOR), label=stage)
    entry = report.entry
    if entry is not None:
        hit = table[(table.stage == entry.stage) & (table.layer == entry.layer)]
        if not hit.empty:
            y = min(float(hit.sqnr_db.iloc[0]), SQNR_CAP)
            ax.scatter(hit["index"], [y], s=180, facecolors="none", edgecolors="black",
                       linewidths=2, zorder=5, label=f"error enters: {entry.layer}")
    ax.set_xticks(xs)
    ax.set_xticklabels([labels[t] for t in xs], rotation=75, fontsize=7)
    ax.set_ylabel("SQNR vs float (dB)")
    ax.set_title(f"{report.recipe.key}: SQNR per layer per stage (capped at {SQNR_CAP:.0f} dB)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def pareto_figure(df: Any, metric: str, front: set[str], higher_is_better: bool = True):
    """Metric against .pte size and against latency (ratio to float); front points ringed."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, x, xlabel in ((axes[0], "pte_kib", ".pte size (KiB)"),
                          (axes[1], "latency_ratio", "latency / float (same process)")):
        ok = df[df.status == "ok"]
        ax.scatter(ok[x], ok[metric], s=18, color="#1f77b4")
        on = ok[ok.key.isin(front)]
        ax.scatter(on[x], on[metric], s=120, facecolors="none", edgecolors="#d62728",
                   linewidths=1.6, label="Pareto front")
        for row in ok.itertuples():
            ax.annotate(row.key, (getattr(row, x), getattr(row, metric)), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric + ("" if higher_is_better else " (lower is better)"))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def saved(fig: Any, path: Any) -> Any:
    """``fig``, written to ``path`` first when one is given (.png, .svg, .pdf)."""
    if path is not None:
        fig.savefig(path, bbox_inches="tight")
    return fig


def svg(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (text, no external references; no metadata
    block, so the page holds no date and names no RDF vocabulary)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata=_NO_SVG_METADATA)
    _pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]
