"""Self-contained HTML pages for a debugging run and a sweep: inline CSS and SVG, no script,
no external asset, every value from the model escaped."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from .metrics import SQNR_CAP

CSS = """
body{font-family:system-ui,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3} td.l{text-align:left}
.banner{border:2px solid #c62828;background:#fdecea;padding:10px 14px;margin:12px 0;
 font-size:14px}
.ok{border-color:#2e7d32;background:#e8f5e9}
td.entry{outline:3px solid #c62828;outline-offset:-3px;font-weight:bold}
tr.entry td.l{background:#fdecea}
.worst{color:#c62828;font-weight:bold}
.muted{color:#777} .svg svg{max-width:100%;height:auto}
"""


MARK_MIN_DROP_DB = 0.5


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        return f"{value:.{digits}f}" if abs(value) >= 10 ** -digits or value == 0 \
            else f"{value:.2e}"
    return esc(value)


def sqnr_color(db: float) -> str:
    """Red at 0 dB and below, green at 40 dB and above."""
    if math.isnan(db):
        return "#ffffff"
    t = max(0.0, min(1.0, min(db, SQNR_CAP) / 40.0))
    r, g = int(255 - 120 * t), int(150 + 90 * t)
    return f"rgb({r},{g},{int(140 + 40 * t)})"


def page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1>" + "\n".join(body) + "</body></html>\n")


def written(text: str, path: Any) -> str:
    """``text``, written to ``path`` first when one is given."""
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def table(df: Any, left: set[str] | None = None, digits: int = 3) -> str:
    left = left or set()
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = "".join(f"<td class=\"l\">{esc(v)}</td>" if c in left else f"<td>{fmt(v, digits)}</td>"
                        for c, v in zip(df.columns, rec))
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


class DebugPage:
    def __init__(self, report: Any) -> None:
        self.r = report

    def render(self) -> str:
        from .plots import sqnr_figure, svg

        r = self.r
        entry = r.entry
        body = [f"<p>Recipe <b>{esc(r.recipe.key)}</b>, {r.run.samples} samples, stages "
                f"{esc(' → '.join(r.stages))}.</p>"]
        if entry is not None:
            body.append(f"<div class=\"banner\" id=\"entry\">Error enters at stage "
                        f"<b>{esc(entry.stage)}</b>, layer <b>{esc(entry.layer)}</b>"
                        f"{' (module <b>' + esc(entry.module) + '</b>)' if entry.module else ''}"
                        f"{' at ' + esc(entry.source) if entry.source else ''}: the output loses "
                        f"{entry.output_drop_db:.1f} dB at that stage.</div>")
        else:
            body.append("<div class=\"banner ok\" id=\"entry\">No stage loses more than 1 dB "
                        "of output SQNR.</div>")
        body += [f"<p class=\"muted\">Stage {esc(s)} skipped: {esc(why)}</p>"
                 for s, why in r.skipped.items()]
        body.append("<h2>Model output per stage (against float)</h2>")
        body.append(table(r.outputs(), left={"stage"}, digits=4))
        body.append("<h2>SQNR per layer per stage</h2>")
        body.append(f"<div class=\"svg\">{svg(sqnr_figure(r))}</div>")
        body.append("<h2>Per layer</h2><p class=\"muted\">SQNR (dB) against the float model; "
                    "isolated: the layer fed float inputs (its own error); local drop: SQNR lost "
                    "at this layer against the previous stage; saturated: share of outputs at "
                    "the ends of the int8 range. <span class=\"worst\">Red</span> marks each "
                    "stage's worst layer; the outlined cell is where the error enters.</p>")
        body.append(self._layer_table())
        return page(f"Quantization debug: {r.recipe.key}", body)

    def _layer_table(self) -> str:
        r = self.r
        entry = r.entry
        worst = {}
        for stage in r.stages:
            ranked = r.ranking(stage)
            if stage == "float" or ranked.empty:
                continue
            top = ranked.iloc[0]
            # after fake_quant a stage is ranked by the SQNR it loses: one losing (almost)
            # nothing has no worst layer to mark
            if stage == "fake_quant" or top.local_drop_db > MARK_MIN_DROP_DB:
                worst[stage] = top.layer
        t = r.table
        stages = list(r.stages)
        head = ("<tr><th>#</th><th>layer</th><th>module</th><th>op</th><th>source</th>"
                + "".join(f"<th>{esc(s)}</th>" for s in stages)
                + "<th>isolated</th><th>cosine</th><th>max |err|</th><th>saturated</th></tr>")
        rows = []
        for la in r.run.layers:
            mine = t[t.layer == la.name].set_index("stage")
            last = mine.iloc[-1] if len(mine) else None
            is_entry = entry is not None and entry.layer == la.name
            cells = [f"<td>{la.index}</td>",
                     f"<td class=\"l{' worst' if la.name in worst.values() else ''}\">"
                     f"{esc(la.name)}</td>", f"<td class=\"l\">{esc(la.module)}</td>",
                     f"<td class=\"l\">{esc(la.op)}</td>",
                     f"<td class=\"l\" title=\"{esc(la.code)}\">{esc(la.source)}</td>"]
            for s in stages:
                db = float(mine.loc[s, "sqnr_db"]) if s in mine.index else math.nan
                cls = " class=\"entry\"" if is_entry and entry.stage == s else ""
                mark = " ◀" if worst.get(s) == la.name else ""
                cells.append(f"<td{cls} style=\"background:{sqnr_color(db)}\">{fmt(db)}{mark}"
                             "</td>")
            iso = float(mine.loc["fake_quant", "isolated_sqnr_db"]) \
                if "fake_quant" in mine.index else math.nan
            cells.append(f"<td>{fmt(iso)}</td>")
            for col, d in (("cosine", 5), ("max_abs_err", 4), ("saturated", 4)):
                cells.append(f"<td>{fmt(float(last[col]), d) if last is not None else '–'}</td>")
            row_class = ' class="entry"' if is_entry else ""
            rows.append(f"<tr{row_class}>{''.join(cells)}</tr>")
        return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


class SweepPage:
    def __init__(self, result: Any) -> None:
        self.r = result

    def render(self) -> str:
        from .plots import pareto_figure, svg

        r = self.r
        cols = ["key", "status", "metric", "metric_drop", "pte_kib", "planned_bytes",
                "latency_ms", "latency_ratio", "vela_cycles", "error"]
        df = r.table[[c for c in cols if c in r.table.columns]]
        front = r.front[[c for c in cols if c in r.front.columns and c != "error"]]
        objectives = ", ".join(f"{k} ({v})" for k, v in r.objectives.items())
        body = [f"<p>{len(r.table)} candidates, metric <b>{esc(r.metric)}</b> on the evaluation "
                f"data in edgetorch's runtime; results in {esc(r.folder)}.</p>",
                f"<h2>Pareto front ({esc(objectives)})</h2>",
                table(front, left={"key", "status"}),
                f"<div class=\"svg\">{svg(pareto_figure(r.table, 'metric', set(r.front.key)))}"
                "</div>", "<h2>All candidates</h2>", table(df, left={"key", "status", "error"})]
        return page("Quantization recipe sweep", body)
