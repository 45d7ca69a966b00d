"""Run one fuzz target for N iterations in total, restarting after each finding, and report.

    nice -n 19 python scripts/fuzz/run_campaign.py pte --runs 1000000 --workdir /tmp/fuzz-pte
    nice -n 19 python scripts/fuzz/run_campaign.py gguf --max-seconds 7200 --workdir /tmp/fuzz-gguf
    nice -n 19 python scripts/fuzz/run_campaign.py etrecord --resume --workdir /tmp/fuzz-etrecord

libFuzzer stops at the first crash; this keeps the corpus in ``<workdir>/corpus`` (seeded from
the checked-in one), restarts until the total reaches ``--runs``, and writes
``<workdir>/summary.json``: iterations, seconds, exec/s, corpus size, coverage and the findings
(``<workdir>/crash-*``, ``timeout-*``, ``oom-*``: copy them to
``tests/fixtures/fuzz/regressions/<target>/``). ``--resume`` continues a campaign in parts (its
corpus and counts), each part listed with the commit it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
TIMEOUT_S = 10  # per input (libFuzzer -timeout)
_DONE = re.compile(r"^(?:Done (\d+) runs|stat::number_of_executed_units: (\d+))")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", choices=sorted(p.stem[len("fuzz_"):] for p in HERE.glob("fuzz_*.py")))
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--max-restarts", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0, help="libFuzzer -seed (0: random)")
    ap.add_argument("--max-seconds", type=int, default=0,
                    help="stop after this long even if --runs is not reached (0: no limit)")
    ap.add_argument("--resume", action="store_true",
                    help="continue the campaign whose summary.json is in --workdir: its "
                         "iterations count toward --runs and each part is listed")
    args = ap.parse_args()

    import targets  # after sys.path: needs edgetorch importable

    work = args.workdir
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for f in targets.corpus_files(args.target):
        shutil.copy(f, corpus / f.name)
    total, restarts, cov, ft = 0, 0, 0, 0
    findings: list[dict] = []
    before_s, before_cpu, parts = 0.0, 0.0, []
    previous = work / "summary.json"
    if args.resume and previous.is_file():
        old = json.loads(previous.read_text())
        total, restarts = old["iterations"], old["restarts"]
        findings, before_s, before_cpu = old["findings"], old["seconds"], old["cpu_seconds"]
        parts = old.get("parts") or [{"iterations": total, "commit": old.get("commit")}]
    first = total
    start = time.time()
    log = (work / "fuzz.log").open("a")
    while total < args.runs and restarts <= args.max_restarts:
        left = args.max_seconds - (time.time() - start) if args.max_seconds else None
        if left is not None and left < 1:
            break
        cmd = [sys.executable, str(HERE / f"fuzz_{args.target}.py"), f"-runs={args.runs - total}",
               *([f"-max_total_time={int(left)}"] if left is not None else []),
               f"-artifact_prefix={work}/", "-print_final_stats=1", f"-seed={args.seed}",
               f"-timeout={TIMEOUT_S}", "-rss_limit_mb=3072", str(corpus)]
        before = set(work.glob("*-*"))
        # stdout too: atheris reports a timeout ("=== Timeout", the Python stack) there.
        proc = subprocess.Popen(cmd, stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True,
                                cwd=work, env=os.environ.copy())
        last, done = 0, None
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            tail = (tail + [line])[-60:]
            if m := _STATUS.match(line):
                last, cov, ft = int(m[1]), int(m[2]), int(m[3])
            elif m := _DONE.match(line):
                done = int(m[1] or m[2])
        proc.wait()
        log.flush()
        total += done if done is not None else last
        new = sorted(set(work.glob("*-*")) - before)
        artifacts = [p for p in new if p.name.split("-")[0] in ("crash", "timeout", "oom", "leak")]
        if proc.returncode != 0 or artifacts:
            restarts += 1
            finding = {"after_runs": total, "artifacts": [p.name for p in artifacts],
                       "exit": proc.returncode, "log_tail": "".join(tail[-25:])}
            timeouts = [p for p in artifacts if p.name.startswith("timeout-")]
            if timeouts and len(timeouts) == len(artifacts):
                finding["replay"] = [_replay(args.target, p) for p in timeouts]
                finding["reproduced"] = any(not r.startswith("ok") for r in finding["replay"])
            findings.append(finding)
            if not artifacts:
                break  # died without saying why (e.g. killed by a signal): stop and report
    seconds = time.time() - start + before_s
    # CPU time of the fuzzers: on a shared machine wall-clock exec/s says more about the load
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = child.ru_utime + child.ru_stime + before_cpu
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                            capture_output=True).stdout.strip() or None
    parts.append({"iterations": total - first, "commit": commit,
                  "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    files = [f for f in corpus.iterdir() if f.is_file()]
    summary = {
        "target": args.target, "iterations": total, "seconds": round(seconds, 1),
        "exec_per_s": round(total / seconds, 1) if seconds else None,
        "cpu_seconds": round(cpu, 1), "exec_per_cpu_s": round(total / cpu, 1) if cpu else None,
        "corpus_files": len(files), "corpus_bytes": sum(f.stat().st_size for f in files),
        "coverage_edges": cov, "features": ft, "restarts": restarts, "findings": findings,
        "commit": commit, "parts": parts,
    }
    real = [f for f in findings if f.get("reproduced", True)]
    summary["findings_reproduced"] = len(real)
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "findings"}))
    print(f"{len(findings)} findings ({len(real)} reproduced; a timeout whose input replays in "
          f"under {TIMEOUT_S} s of CPU was the machine's load); details in {work / 'summary.json'}")
    return 1 if real else 0


def _replay(target: str, path: Path) -> str:
    """A timeout's input run again alone: ``ok in X s CPU`` when it finishes within the
    per-input limit in CPU time (libFuzzer's limit is wall-clock time, which a loaded machine
    and ``nice`` stretch), else what it did."""
    try:
        out = subprocess.run([sys.executable, str(HERE / "replay.py"), target, str(path)],
                             capture_output=True, text=True, timeout=30 * TIMEOUT_S).stdout
    except subprocess.TimeoutExpired:
        return f"did not finish within {30 * TIMEOUT_S} s"
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "ok" and (m := re.search(r"cpu=([0-9.]+)$", rest)):
            cpu = float(m[1])
            return f"ok in {cpu:.2f} s CPU" if cpu < TIMEOUT_S else f"slow: {cpu:.2f} s CPU"
        if kind == "finding":
            return f"finding: {rest}"
    return "the replay printed no result"



if __name__ == "__main__":
    sys.exit(main())
