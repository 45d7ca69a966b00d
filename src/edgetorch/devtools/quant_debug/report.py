"""What ``debug_quantization`` returns: per-layer tables, the ranking of layers per stage,
where the error enters, a plot of SQNR per layer per stage and a self-contained HTML page."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .debugger import FAKE_QUANT, FLOAT, DebugRun
from .html import DebugPage, written
from .metrics import SQNR_CAP, capped

COLUMNS = ["index", "layer", "module", "module_type", "op", "kind", "source", "code", "stage",
           "sqnr_db", "sqnr_vs_prev_db", "cosine", "max_abs_err", "saturated",
           "isolated_sqnr_db", "local_drop_db"]
ENTRY_MIN_DROP_DB = 1.0  # an output losing less than this at every stage has no entry point


@dataclass(frozen=True)
class EntryPoint:
    """Where the error enters: the stage whose output loses the most SQNR against the stage
    before it, and the layer ranked first there."""

    stage: str
    layer: str
    module: str
    source: str
    output_drop_db: float

    def __str__(self) -> str:
        where = f" ({self.module})" if self.module else ""
        src = f" at {self.source}" if self.source else ""
        return (f"the error enters at stage '{self.stage}', layer '{self.layer}'{where}{src}: "
                f"the output loses {self.output_drop_db:.1f} dB there")


class QuantDebugReport:
    """Per-layer results of one debugging run (see :mod:`.debugger` for the stages)."""

    def __init__(self, run: DebugRun) -> None:
        self.run = run
        self.recipe = run.recipe
        self.stages = list(run.stages)
        self.skipped = dict(run.skipped)
        self._layers = {la.name: la for la in run.layers}
        self.table = self._table()

    # ---- tables -------------------------------------------------------------------------------

    def _table(self):
        import pandas as pd

        rows = []
        prev_sqnr = {}
        for stage in self.stages:
            for la in self.run.layers:
                acc = self.run.vs_float.get((la.name, stage))
                if acc is None:
                    continue
                prev = self.run.vs_prev.get((la.name, stage))
                iso = self.run.isolated.get(la.name) if stage == FAKE_QUANT else None
                prev_sqnr[(la.name, stage)] = prev.sqnr() if prev else math.nan
                rows.append({
                    "index": la.index, "layer": la.name, "module": la.module,
                    "module_type": la.module_type, "op": la.op, "kind": la.kind,
                    "source": la.source, "code": la.code, "stage": stage,
                    "sqnr_db": acc.sqnr(),
                    "sqnr_vs_prev_db": prev.sqnr() if prev else math.nan,
                    "cosine": acc.cosine(), "max_abs_err": acc.max_abs,
                    "saturated": acc.saturated / acc.numel if la.qrange and acc.numel
                    else math.nan,
                    "isolated_sqnr_db": iso.sqnr() if iso else math.nan,
                    "local_drop_db": math.nan,
                })
        for row in rows:
            if row["stage"] == FLOAT:
                continue
            la = self._layers[row["layer"]]
            inputs = [capped(prev_sqnr[(p, row["stage"])]) for p in la.producers
                      if not math.isnan(prev_sqnr.get((p, row["stage"]), math.nan))]
            own = prev_sqnr[(la.name, row["stage"])]
            if not math.isnan(own):
                row["local_drop_db"] = (min(inputs) if inputs else SQNR_CAP) - capped(own)
        return pd.DataFrame(rows, columns=COLUMNS)

    def layers(self):
        """One row per layer, one SQNR column per stage (wide)."""
        wide = self.table.pivot_table(index=["index", "layer", "module", "op", "source"],
                                      columns="stage", values="sqnr_db", aggfunc="first")
        return wide[[s for s in self.stages if s in wide.columns]].reset_index()

    def outputs(self):
        """The model's (first) output per stage against float: SQNR, cosine, max abs error."""
        import pandas as pd

        rows = [{"stage": s, "sqnr_db": a.sqnr(), "cosine": a.cosine(), "max_abs_err": a.max_abs}
                for s in self.stages if (a := self.run.outputs.get(s)) is not None]
        return pd.DataFrame(rows, columns=["stage", "sqnr_db", "cosine", "max_abs_err"])

    def ranking(self, stage: str | None = None):
        """Layers by the error they add at ``stage`` (default: the entry stage), worst first:
        at ``fake_quant`` by isolated SQNR (lowest first), elsewhere by local SQNR drop."""
        stage = stage or (self.entry.stage if self.entry else FAKE_QUANT)
        rows = self.table[self.table.stage == stage]
        if stage == FAKE_QUANT:
            return rows.sort_values(["isolated_sqnr_db", "index"], na_position="last")
        return rows.sort_values(["local_drop_db", "index"], ascending=[False, True],
                                na_position="last")

    # ---- where the error enters -------------------------------------------------------------

    def output_drops(self) -> dict[str, float]:
        """Per stage: how much output SQNR it loses against the stage before it."""
        drops, before = {}, SQNR_CAP
        for stage in self.stages:
            acc = self.run.outputs.get(stage)
            if acc is None:
                continue
            now = capped(acc.sqnr())
            drops[stage] = before - now
            before = now
        return drops

    @property
    def entry(self) -> EntryPoint | None:
        drops = {s: d for s, d in self.output_drops().items() if s != FLOAT}
        if not drops:
            return None
        stage = max(drops, key=lambda s: (drops[s], -self.stages.index(s)))
        if drops[stage] < ENTRY_MIN_DROP_DB:
            return None
        ranked = self.ranking(stage)
        if ranked.empty:
            return None
        top = ranked.iloc[0]
        return EntryPoint(stage, top.layer, top.module, top.source, drops[stage])

    def entry_stage(self, layer: str) -> str | None:
        """The stage at which ``layer``'s own SQNR (against float) falls the most."""
        rows = self.table[self.table.layer == layer].set_index("stage")
        best, drop, before = None, -math.inf, SQNR_CAP
        for stage in self.stages:
            if stage not in rows.index:
                continue
            now = capped(rows.loc[stage, "sqnr_db"])
            if stage != FLOAT and before - now > drop:
                best, drop = stage, before - now
            before = now
        return best

    def module_ranking(self, stage: str = FAKE_QUANT) -> list[str]:
        """Modules with weights, worst first at ``stage`` (what mixed precision keeps float)."""
        ranked = self.ranking(stage)
        out: list[str] = []
        for row in ranked.itertuples():
            if row.kind == "weighted" and row.module and row.module not in out:
                out.append(row.module)
        return out

    # ---- output -------------------------------------------------------------------------------

    def plot(self, path: str | Path | None = None, ax: Any = None):
        """SQNR (dB) per layer (x, graph order) per stage (one line each); infinite SQNR is
        drawn at the cap, the entry point is circled. Returns the matplotlib Figure."""
        from .plots import saved, sqnr_figure

        return saved(sqnr_figure(self, ax), path)

    def to_html(self, path: str | Path | None = None) -> str:
        """One self-contained HTML page (inline SVG, no external assets)."""
        return written(DebugPage(self).render(), path)

    def __str__(self) -> str:
        lines = [f"quantization debug: {self.recipe.key}, {self.run.samples} samples, stages "
                 f"{' -> '.join(self.stages)}"]
        lines += [f"  skipped {s}: {why}" for s, why in self.skipped.items()]
        entry = self.entry
        lines.append(f"  {entry}" if entry else "  no stage loses more than "
                     f"{ENTRY_MIN_DROP_DB} dB at the output")
        for row in self.outputs().itertuples():
            lines.append(f"  output at {row.stage:>10}: SQNR {row.sqnr_db:7.2f} dB, cosine "
                         f"{row.cosine:.5f}, max |err| {row.max_abs_err:.3g}")
        return "\n".join(lines)
