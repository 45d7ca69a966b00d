"""Replay the fuzz corpus and every regression input (tests/fixtures/fuzz) through the fuzz
targets: only edgetorch's typed errors may come out (scripts/fuzz/targets.py says exactly what
counts as a finding), and a seed must run without any error. No fuzzing happens here, see
``make fuzz-short``.

Each target's files run in a child process (``scripts/fuzz/replay.py``) that reports every file
as it starts and ends, so a file that hangs is named and stopped after a generous time limit
(a hang guard, not a speed test), and one that kills the interpreter is named too."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

FUZZ_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "fuzz"
sys.path.insert(0, str(FUZZ_SCRIPTS))

import targets  # noqa: E402

FUZZ_DIR = targets.FUZZ_DIR
HANG_LIMIT_S = 120  # per file: far above any file's time, far below "never"
NEEDS_TORCH = {"etrecord"}


def _replay(target: str) -> tuple[list[str], list[str]]:
    """(findings, problems) of replaying ``target``'s files in a child process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[2] / "src"), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, str(FUZZ_SCRIPTS / "replay.py"), target],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        findings, problems, current, seen = [], [], None, 0
        while True:
            try:
                line = lines.get(timeout=HANG_LIMIT_S)
            except queue.Empty:
                proc.kill()
                problems.append(f"{current or 'start-up'} did not finish within {HANG_LIMIT_S} s")
                break
            if line is None:
                break
            kind, _, rest = line.partition(" ")
            if kind == "start":
                current = rest
            elif kind == "ok":
                current, seen = None, seen + 1
            elif kind == "finding":
                findings.append(rest)
                current, seen = None, seen + 1
        proc.wait()
        if proc.returncode not in (0, 1) and not problems:
            err.seek(0)
            tail = "".join(err.readlines()[-15:])
            problems.append(f"the replay process died (exit {proc.returncode}) during "
                            f"{current or 'start-up'}:\n{tail}")
    if not problems and seen != len(targets.corpus_files(target)):
        problems.append(f"replayed {seen} of {len(targets.corpus_files(target))} files")
    return findings, problems


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_corpus_and_regressions_raise_only_typed_errors(target):
    if target in NEEDS_TORCH:
        pytest.importorskip("torch")
    files = targets.corpus_files(target)
    assert any(f.name.startswith("seed-") for f in files), f"no seeds for {target}"
    findings, problems = _replay(target)
    assert not problems, "\n".join(problems)
    assert not findings, "\n".join(findings)


def test_replay_names_a_finding_and_a_hang(tmp_path, monkeypatch):
    """The replay's own plumbing: a finding is reported with its file, and a file that does
    not finish is named (with a short limit and a target that sleeps)."""
    bad = tmp_path / "regressions" / "chat_template"
    bad.mkdir(parents=True)
    (bad / "untyped.jinja").write_text("x")
    out = subprocess.run(
        [sys.executable, "-c", "import sys, targets, replay\n"
         "targets.TARGETS['chat_template'] = lambda: (lambda data: targets.check(KeyError('k')))\n"
         f"sys.exit(replay.main(['chat_template', {str(bad / 'untyped.jinja')!r}]))"],
        capture_output=True, text=True, cwd=FUZZ_SCRIPTS,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(FUZZ_SCRIPTS),
                                                         os.environ.get("PYTHONPATH", "")])))
    assert out.returncode == 1 and "finding" in out.stdout and "untyped KeyError" in out.stdout
    monkeypatch.setattr(sys.modules[__name__], "HANG_LIMIT_S", 0.01)
    _, problems = _replay("chat_template")  # nothing replays in 10 ms: start-up is "hanging"
    assert problems and "did not finish within 0.01 s" in problems[0]


def test_seeds_run_end_to_end():
    """The seeds are real programs: every method of each .pte seed loads and executes (so the
    corpus exercises execute, not only the parser)."""
    from edgetorch.runtime import Runtime

    for f in targets.corpus_files("pte"):
        if f.name.startswith("seed-"):
            program = Runtime.get().load_program(f.read_bytes())
            assert targets._run_methods(program) == min(len(program.method_names),
                                                        targets.MAX_METHODS), f.name


def test_corpus_stays_small():
    total = sum(f.stat().st_size for f in FUZZ_DIR.rglob("*") if f.is_file())
    assert total < 3_000_000, f"tests/fixtures/fuzz holds {total} bytes; minimize it (-merge=1)"


def test_a_finding_is_reported():
    """The classifier itself: untyped errors and typed errors hiding a MemoryError are
    findings; a plain typed error is not."""
    from edgetorch.errors import FormatError, KernelError, MemoryAllocationError

    with pytest.raises(targets.Finding, match="untyped IndexError"):
        targets.check(IndexError("x"))
    wrapped = KernelError("aten::arange.out failed")
    wrapped.__cause__ = MemoryError()
    with pytest.raises(targets.Finding, match="wraps MemoryError"):
        targets.check(wrapped)
    targets.check(FormatError("truncated"))
    planned = MemoryAllocationError("cannot allocate planned buffer 1")
    planned.__cause__ = MemoryError()
    targets.check(planned)  # the runtime's deliberate report of a failed planned allocation
