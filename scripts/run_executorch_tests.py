#!/usr/bin/env python3
"""Run ExecuTorch's own Python tests against edgetorch and against ExecuTorch 1.5.1.

    make et-suite                                     # every default area, report into docs
    python scripts/run_executorch_tests.py --source /path/to/executorch.git --ref <commit> \\
        --areas exir,xnnpack --report docs/compatibility.md
    python scripts/run_executorch_tests.py ... --files exir/tests/test_tensor.py --side ours

The fetched ExecuTorch tree (a git directory, bare or not) is exported with ``git archive``
into ``<build>/src`` and its test code staged twice beside the installed packages (see
``et_suite/staging.py``): renamed for edgetorch, unchanged for ExecuTorch. Each test file
then runs under pytest, one file at a time, under each side's Python (``--python`` /
``--ref-python``, or the area's defaults: the Arm areas use their own venvs). ExecuTorch's
results depend only on the commit and its Python, so they are kept and reused
(``--rerun-ref`` runs them again). Results are JSON under ``<build>/results``; ``--report``
writes the tables into a Markdown file between the runner's markers.

A developer tool, not part of ``make test``: it needs the ExecuTorch sources and takes hours.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from et_suite import report
from et_suite.areas import AREAS, BY_NAME, SUPPORT_DIRS, Area
from et_suite.execute import FileResult, batch_name, has_module, run_batch
from et_suite.pte_check import check as check_ptes
from et_suite.staging import export_sources, resolve_commit, stage

REPO = Path(__file__).resolve().parents[1]
DEFAULT_AREAS = "exir,xnnpack,suite-xnnpack,llm,quantized-kernels"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="git directory of pytorch/executorch")
    p.add_argument("--ref", required=True, help="commit (or ref) of the source to test")
    p.add_argument("--build", default=str(REPO / "build/et-suite"), help="work folder")
    p.add_argument("--areas", default=DEFAULT_AREAS,
                   help=f"comma-separated, from: {', '.join(a.name for a in AREAS)}")
    p.add_argument("--files", nargs="*", default=[], help="only these test files (paths in "
                   "ExecuTorch's tree; they must lie under the chosen areas' roots)")
    p.add_argument("--side", choices=("both", "ours", "ref"), default="both")
    p.add_argument("--python", help="edgetorch's Python (default: the area's)")
    p.add_argument("--ref-python", help="ExecuTorch 1.5.1's Python (default: the area's)")
    p.add_argument("--deps", default="", help="folders for edgetorch's PYTHONPATH holding "
                   "test-only packages (parameterized, expecttest, pytest-timeout ...)")
    p.add_argument("--ref-deps", default="", help="the same for the reference Python")
    p.add_argument("--marker", help="override the area's pytest marker (comma = any of)")
    p.add_argument("--keyword", help="override the area's node-id text filter")
    p.add_argument("--test-timeout", type=float, default=300.0,
                   help="seconds per test (pytest-timeout, where importable)")
    p.add_argument("--stall-timeout", type=float, default=900.0,
                   help="seconds without a test finishing before the runner kills pytest")
    p.add_argument("--batch", type=int, default=20, help="test files per pytest process")
    p.add_argument("--rerun-ref", action="store_true", help="do not reuse ExecuTorch's results")
    p.add_argument("--resume", action="store_true", help="reuse edgetorch's results too")
    p.add_argument("--check-pte-in-ref", action="store_true",
                   help="keep every .pte edgetorch writes during the area's tests and run them "
                   "all in ExecuTorch's runtime afterwards (see et_suite/pte_check.py)")
    p.add_argument("--report", help="Markdown file to write the tables into")
    p.add_argument("--report-only", action="store_true", help="tables from stored results")
    return p.parse_args()


def side_env(python: str, boot: Path, paths: list[str], build: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = os.pathsep.join([str(boot), *paths])
    # the venv's scripts first, as its activation would: tools such as the ML SDK's
    # model-converter are found on PATH by ExecuTorch's tests
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    env["NUMBA_CACHE_DIR"] = str(build / "numba")
    env.setdefault("TMPDIR", str(build / "tmp"))
    Path(env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    return env


def area_files(area: Area, tree: Path, only: list[str]) -> list[str]:
    files = []
    for root in area.roots:
        for path in sorted((tree / root).rglob("*.py")):
            rel = path.relative_to(tree).as_posix()
            name = path.name
            if not (name.startswith("test_") or name.endswith("_test.py")):
                continue
            if any(rel.startswith(prefix) for prefix in area.skip):
                continue
            if only and rel not in only:
                continue
            files.append(rel)
    return files


def result_path(build: Path, commit: str, side: str, area: str, test_file: str) -> Path:
    return build / "results" / commit[:12] / side / area / (test_file.replace("/", "__") + ".json")


def load_results(build: Path, commit: str, side: str, area: str) -> dict[str, FileResult]:
    folder = build / "results" / commit[:12] / side / area
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        r = FileResult.from_json(json.loads(path.read_text()))
        out[r.file] = r
    return out


def run_area(args: argparse.Namespace, area: Area, build: Path, commit: str,
             stages: dict[str, Path]) -> None:
    sides = ("ours", "ref") if args.side == "both" else (args.side,)
    for side in sides:
        python = (args.python if side == "ours" else args.ref_python) or str(
            REPO / (area.python if side == "ours" else area.ref_python))
        if not Path(python).exists():
            print(f"[{area.name}] {side}: {python} does not exist, skipped", flush=True)
            continue
        extra = [p for p in (args.deps if side == "ours" else args.ref_deps).split(os.pathsep)
                 if p]
        paths = ([str(REPO / "src")] if side == "ours" else []) + extra
        env = side_env(python, stages[side] / "boot", paths, build)
        pte_dir = build / "ptes" / commit[:12] / area.name
        if side == "ours" and args.check_pte_in_ref:
            env["ET_SUITE_PTE_DIR"] = str(pte_dir)
        timeout = args.test_timeout if has_module(python, "pytest_timeout", env) else None
        tree = stages[side] / "tree"
        todo = [f for f in area_files(area, tree, args.files)
                if args.rerun_ref and side == "ref"
                or not result_path(build, commit, side, area.name, f).exists()
                or side == "ours" and not args.resume]
        marker = args.marker if args.marker is not None else area.marker
        keyword = args.keyword if args.keyword is not None else area.keyword
        for i in range(0, len(todo), args.batch):
            files = todo[i:i + args.batch]
            results = run_batch(python, tree, files, env, stall=args.stall_timeout,
                                test_timeout=timeout, log_dir=build / "logs" / side,
                                name=batch_name(area.name, files), marker=marker,
                                keyword=keyword)
            for f, r in results.items():
                out = result_path(build, commit, side, area.name, f)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(r.to_json(), indent=1))
                print(f"[{area.name}] {side:4s} {f}: {report._cell(r)} ({r.seconds:.0f}s)"
                      f"{' ' + '; '.join(r.notes)[:200] if r.notes else ''}", flush=True)


def check_area_ptes(args: argparse.Namespace, area: Area, build: Path, commit: str,
                    stages: dict[str, Path]) -> None:
    folder = build / "ptes" / commit[:12] / area.name
    if not folder.is_dir():
        return
    python = args.python or str(REPO / area.python)
    ref_python = args.ref_python or str(REPO / area.ref_python)
    env = side_env(python, stages["ours"] / "boot", [str(REPO / "src")], build)
    ref_env = side_env(ref_python, stages["ref"] / "boot", [], build)
    verdicts = check_ptes(folder, python, env, ref_python, ref_env)
    out = build / "results" / commit[:12] / "pte-check" / f"{area.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(verdicts, indent=1))
    print(f"[{area.name}] .pte check: " + ", ".join(f"{len(v)} {k}" for k, v in verdicts.items()))


def write_report(args: argparse.Namespace, areas: list[Area], build: Path, commit: str) -> None:
    summaries, body = [], []
    for area in areas:
        ours = load_results(build, commit, "ours", area.name)
        theirs = load_results(build, commit, "ref", area.name)
        if not ours and not theirs:
            continue
        s = report.area_summary(area.name, ours, theirs)
        summaries.append(s)
        body += ["", f"### {area.name}: {', '.join(f'`{r}`' for r in area.roots)}"
                 + (f" (marker `{area.marker}`)" if area.marker else "")
                 + (f" (node ids holding `{area.keyword}`)" if area.keyword else ""), "",
                 *report.file_table(ours, theirs)]
        checked = build / "results" / commit[:12] / "pte-check" / f"{area.name}.json"
        if checked.exists():
            body += ["", *report.pte_check_lines(json.loads(checked.read_text()))]
        if s["only_ours"]:
            body += ["", f"Passing on edgetorch, failing on ExecuTorch 1.5.1 ({len(s['only_ours'])}):",
                     "", *report.only_ours(theirs, s["only_ours"])]
    head = ["", f"Source commit `{commit[:12]}`; `python scripts/run_executorch_tests.py "
            f"--areas {','.join(a.name for a in areas)}` (see the runner's docstring).", "",
            *report.summary_table(summaries)]
    text = "\n".join(head + body)
    print(text)
    if args.report:
        report.write_section(Path(args.report), head + body, [a.name for a in AREAS])


def main() -> int:
    args = parse_args()
    build = Path(args.build).resolve()
    if "executorch" in str(build):
        # torch turns off export guards for any frame whose file path contains "executorch"
        # (torch/export/_unlift.py): staged tests must not get that special treatment.
        sys.exit(f"--build {build}: choose a path without 'executorch' in it")
    try:
        areas = [BY_NAME[name] for name in args.areas.split(",") if name]
    except KeyError as exc:
        sys.exit(f"unknown area {exc}; known: {', '.join(BY_NAME)}")
    git_dir, commit = resolve_commit(Path(args.source), args.ref)
    if not args.report_only:
        dirs = tuple(sorted({r.split("/")[0] for a in areas for r in a.roots} | set(SUPPORT_DIRS)))
        src = export_sources(git_dir, commit, dirs, build / "src")
        stages = stage(src, build / "stage")
        for area in areas:
            run_area(args, area, build, commit, stages)
            if args.check_pte_in_ref:
                check_area_ptes(args, area, build, commit, stages)
    write_report(args, areas, build, commit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
