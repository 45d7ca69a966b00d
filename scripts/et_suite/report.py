"""The tables: per area, per file, and the tests only edgetorch passes; written into a doc.

Only tests that pass on ExecuTorch count toward the target: a test of a feature newer than the
1.5.1 wheel fails there too. For each file, the reason column groups edgetorch's failures among
ExecuTorch's passes by their first error line, most frequent first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from et_suite.execute import PASSING, FileResult

BEGIN = "<!-- et-suite:begin (scripts/run_executorch_tests.py writes this section) -->"
END = "<!-- et-suite:end -->"


def _passed(r: FileResult | None) -> set[str]:
    return {n for n, t in r.tests.items() if t["outcome"] in PASSING} if r else set()


def _cell(r: FileResult | None) -> str:
    if r is None:
        return "not run"
    if not r.tests:
        return "0 collected" + (" (collection error)" if r.notes else "")
    extra = [f"{r.count(k)} {k}" for k in ("failed", "error", "crashed", "timeout", "skipped")
             if r.count(k)]
    return f"{r.count('passed')}/{len(r.tests)}" + (f" ({', '.join(extra)})" if extra else "")


def _short(reason: str) -> str:
    line = next((ln for ln in reason.splitlines() if ln.strip()), reason).strip()
    line = re.sub(r"^(collection: )?E\s+", r"\1", line)
    line = re.sub(r"/[^\s'\"]*/(site-packages|src|tree)/", "", line)
    line = line.replace("|", "\\|").replace("`", "'")
    return line[:160] + ("…" if len(line) > 160 else "")


def reasons(ours: FileResult | None, theirs: FileResult | None, limit: int = 3) -> str:
    """Why edgetorch fails tests of this file that pass on ExecuTorch."""
    if ours is None:
        return ""
    lost = _passed(theirs) - _passed(ours)
    if not lost:
        return ""
    if not ours.tests and ours.notes:
        return _short(ours.notes[0])
    counts = Counter(_short(ours.tests[n]["reason"]) if n in ours.tests else
                     "not collected on edgetorch" for n in lost)
    parts = [f"{n}× {why}" if n > 1 else why for why, n in counts.most_common(limit)]
    more = len(counts) - limit
    return "; ".join(parts) + (f"; {more} other reasons" if more > 0 else "")


def area_summary(name: str, ours: dict[str, FileResult], theirs: dict[str, FileResult]) -> dict:
    et_pass = set().union(*(_passed(r) for r in theirs.values()))
    our_pass = set().union(*(_passed(r) for r in ours.values()))
    return {"area": name, "files": len(set(ours) | set(theirs)), "et": len(et_pass),
            "ours": len(our_pass), "kept": len(et_pass & our_pass),
            # only files ExecuTorch's side ran: an unrun file says nothing about its tests
            "only_ours": sorted(n for n in our_pass - et_pass if n.split("::")[0] in theirs)}


def summary_table(summaries: Iterable[dict]) -> list[str]:
    lines = ["| area | files | ExecuTorch 1.5.1 passes | edgetorch passes | of ExecuTorch's "
             "passes, edgetorch passes | share |", "|---|---|---|---|---|---|"]
    for s in summaries:
        share = f"{100 * s['kept'] / s['et']:.0f} %" if s["et"] else "–"
        lines.append(f"| {s['area']} | {s['files']} | {s['et']} | {s['ours']} | {s['kept']} "
                     f"| {share} |")
    return lines


def file_table(ours: dict[str, FileResult], theirs: dict[str, FileResult]) -> list[str]:
    lines = ["| test file | edgetorch | ExecuTorch 1.5.1 | why edgetorch fails what ExecuTorch "
             "passes |", "|---|---|---|---|"]
    for f in sorted(set(ours) | set(theirs)):
        o, t = ours.get(f), theirs.get(f)
        if (o is None or not o.tests) and (t is None or not t.tests) and not (o and o.notes):
            continue
        lines.append(f"| `{f}` | {_cell(o)} | {_cell(t)} | {reasons(o, t)} |")
    return lines


def only_ours(theirs: dict[str, FileResult], tests: list[str]) -> list[str]:
    out = []
    for n in tests:
        t = theirs.get(n.split("::", 1)[0])
        why = _short(t.tests[n]["reason"]) if t and n in t.tests else "not collected"
        state = t.tests[n]["outcome"] if t and n in t.tests else "–"
        out.append(f"- `{n}` — ExecuTorch: {state}, {why}")
    return out


def write_section(doc: Path, body: list[str], order: Iterable[str] = ()) -> None:
    """Replace the runner's section of ``doc`` (appended at the end the first time). Areas
    the section already reports and ``body`` does not keep their row and tables, so one area
    can be run and reported on its own; ``order`` is the order of the areas."""
    text = doc.read_text() if doc.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        old, tail = rest.split(END, 1)
        body = merge_sections(old.strip("\n").split("\n"), body, list(order))
        text = head + "\n".join([BEGIN, *body, END]) + tail
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join([BEGIN, *body, END]) + "\n"
    doc.write_text(text)


def _parts(lines: list[str]) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """A section's lines before the summary table, its rows by area, its tables by area."""
    pre: list[str] = []
    rows: dict[str, str] = {}
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("### "):
            current = blocks.setdefault(line[4:].split(":", 1)[0].strip(), [])
        if current is not None:
            current.append(line)
        elif line.startswith("| ") and not line.startswith("| area |"):
            rows[line.split("|")[1].strip()] = line
        elif not line.startswith(("| area |", "|---")):
            pre.append(line)
    return pre, rows, blocks


def merge_sections(old: list[str], new: list[str], order: list[str]) -> list[str]:
    """``new``'s rows and tables, plus those of areas only ``old`` has, in ``order`` (then
    the rest by name); the heading names every area reported."""
    _, old_rows, old_blocks = _parts(old)
    pre, rows, blocks = _parts(new)
    for area in old_rows.keys() - rows.keys():
        rows[area] = old_rows[area]
        if area in old_blocks:
            blocks[area] = old_blocks[area]
    names = sorted(rows, key=lambda a: (order.index(a) if a in order else len(order), a))
    pre = [re.sub(r"--areas [^` ]*", f"--areas {','.join(names)}", line) for line in pre]
    while pre and not pre[-1].strip():
        pre.pop()
    out = [*pre, "", *summary_table([])[:2], *(rows[a] for a in names)]
    for area in names:
        block = blocks.get(area, [])
        while block and not block[-1].strip():
            block = block[:-1]
        out += ["", *block] if block else []
    return out


def pte_check_lines(verdicts: dict[str, list]) -> list[str]:
    """The .pte check of an area: counts, then every program ExecuTorch did not run."""
    total = sum(len(v) for v in verdicts.values())
    counts = ", ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in sorted(verdicts.items()))
    lines = [f"Every `.pte` edgetorch wrote during these tests ({total}), run in ExecuTorch "
             f"1.5.1's runtime on the same inputs as in edgetorch's: {counts}."]
    for kind in ("executorch_failed", "executorch_crashed", "differ"):
        for rec in verdicts.get(kind, []):
            lines.append(f"- {kind.replace('_', ' ')}: `{rec['test'] or rec['pte']}` — "
                         f"{_short(rec['detail'])}")
    return lines
