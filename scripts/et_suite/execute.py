"""Run staged test files under one Python, surviving aborts and hangs.

A batch of files runs in one pytest process in its stage's tree (as ExecuTorch's CI runs a
folder); the outcome plugin logs each test as it starts and ends. When the process dies (a C++
abort) or its log stops growing for ``stall`` seconds (a hang), the test that had started
without ending is recorded as ``crashed``/``timeout`` and the batch runs again without the
tests already decided, at most ``MAX_RESTARTS`` times. With pytest-timeout importable, each
test also gets ``--timeout`` seconds (thread method) inside pytest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

MAX_RESTARTS = 20
PASSING = ("passed",)
# Worst first: a test's outcome is the worst of its phases (and subtests).
SEVERITY = ("crashed", "timeout", "error", "failed", "xpassed", "passed", "xfailed", "skipped")


@dataclass
class FileResult:
    file: str
    tests: dict[str, dict[str, str]] = field(default_factory=dict)  # nodeid -> outcome, reason
    notes: list[str] = field(default_factory=list)  # collection errors, restarts, timeouts
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for t in self.tests.values() if t["outcome"] == outcome)

    def to_json(self) -> dict:
        return {"file": self.file, "tests": self.tests, "notes": self.notes,
                "seconds": round(self.seconds, 1)}

    @classmethod
    def from_json(cls, data: dict) -> FileResult:
        return cls(data["file"], data["tests"], data.get("notes", []), data.get("seconds", 0))


def batch_name(area: str, files: list[str]) -> str:
    """The name of a batch's log files: its area and first file (and how many more). Named
    after what it runs, not its place in the run, so runs of different files of one area at
    the same time (``--files``) never write to each other's logs."""
    first = files[0].removesuffix(".py").replace("/", "__")
    return f"{area}-{first}" + (f"+{len(files) - 1}" if len(files) > 1 else "")


def has_module(python: str, module: str, env: dict[str, str]) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], env=env,
                          capture_output=True).returncode == 0


def _merge(tests: dict, nodeid: str, outcome: str, reason: str) -> None:
    old = tests.get(nodeid)
    if old is None or SEVERITY.index(outcome) < SEVERITY.index(old["outcome"]):
        tests[nodeid] = {"outcome": outcome, "reason": reason}


def _read_log(log: Path, tests: dict, notes: dict, seconds: dict) -> tuple[str | None, bool]:
    """Fold the plugin's lines in; returns (the test that started and never ended, finished)."""
    started: str | None = None
    finished = False
    if not log.exists():
        return None, False
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "start" in rec:
            started = rec["start"]
        elif "end" in rec:
            started = None
        elif "nodeid" in rec:
            _merge(tests, rec["nodeid"], rec["outcome"], rec["reason"])
            key = rec["nodeid"].split("::", 1)[0]
            seconds[key] = seconds.get(key, 0.0) + rec.get("seconds", 0.0)
        elif "collect" in rec and rec.get("reason"):
            notes.setdefault(rec["collect"].split("::", 1)[0], []).append(
                f"collection: {rec['reason']}")
        elif "finished" in rec:
            finished = True
    return started, finished


def _wait(proc: subprocess.Popen, log: Path, stall: float) -> bool:
    """Wait for ``proc``; kill its group when ``log`` stops growing for ``stall`` seconds."""
    last_size, last_change = -1, time.monotonic()
    while proc.poll() is None:
        time.sleep(2)
        size = log.stat().st_size if log.exists() else 0
        if size != last_size:
            last_size, last_change = size, time.monotonic()
        elif time.monotonic() - last_change > stall:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
    return False


def run_batch(python: str, tree: Path, files: list[str], env: dict[str, str], *,
              stall: float, test_timeout: float | None, log_dir: Path, name: str,
              marker: str = "", keyword: str = "") -> dict[str, FileResult]:
    """Run ``files`` (paths in ``tree``) in one pytest process, restarted after each crash or
    hang without the tests already decided, until every selected test has an outcome."""
    tests: dict[str, dict[str, str]] = {}
    notes: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    log_dir.mkdir(parents=True, exist_ok=True)
    skip_file = log_dir / f"{name}.skip"
    skip_file.write_text("")
    log = log_dir / f"{name}.jsonl"
    for attempt in range(MAX_RESTARTS + 1):
        log.unlink(missing_ok=True)
        # -c: the stage's ini even where a test folder has its own (backends/arm/test/pytest.ini
        # would otherwise become the rootdir's, without the outcome plugin)
        cmd = [python, "-m", "pytest", "-q", "-c", str(tree / "pytest.ini"),
               "--continue-on-collection-errors", *files]
        if test_timeout:
            cmd += [f"--timeout={test_timeout:.0f}", "--timeout-method=thread"]
        run_env = dict(env, ET_SUITE_LOG=str(log), ET_SUITE_SKIP=str(skip_file),
                       ET_SUITE_MARKER=marker, ET_SUITE_KEYWORD=keyword)
        with open(log_dir / f"{name}.out", "a" if attempt else "w") as out:
            proc = subprocess.Popen(cmd, cwd=tree, env=run_env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            timed_out = _wait(proc, log, stall)
        code = proc.returncode
        before = set(tests)
        culprit, finished = _read_log(log, tests, notes, seconds)
        if finished and not timed_out:
            if code not in (0, 1, 5):  # 2: interrupted, 3: internal error, 4: usage error
                for f in files:
                    notes.setdefault(f, []).append(f"pytest exited {code}")
            break
        why = "timeout" if timed_out else "crashed"
        detail = (f"no progress for {stall:.0f}s" if timed_out
                  else f"process died ({_signal_name(code)})")
        if culprit is None or culprit in before:  # nothing to deselect: do not loop
            for f in files:
                notes.setdefault(f, []).append(f"{why}: {detail} (not in a test)")
            break
        _merge(tests, culprit, why, detail)
        skip_file.write_text("\n".join(tests) + "\n")
    else:
        notes.setdefault(files[0], []).append(f"gave up after {MAX_RESTARTS} restarts")
    results = {f: FileResult(f, notes=notes.get(f, []), seconds=seconds.get(f, 0.0))
               for f in files}
    for nodeid, outcome in tests.items():
        f = nodeid.split("::", 1)[0]
        if f in results:
            results[f].tests[nodeid] = outcome
    return results


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            pass
    return f"exit {code}"
