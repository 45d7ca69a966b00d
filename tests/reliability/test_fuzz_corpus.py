"""Replay the fuzz corpus and every regression input (tests/fixtures/fuzz) through the fuzz
targets: only edgetorch's typed errors may come out (scripts/fuzz/targets.py says exactly what
counts as a finding). Torch-free and fast: no fuzzing happens here, see ``make fuzz-short``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "fuzz"))

import targets  # noqa: E402

FUZZ_DIR = targets.FUZZ_DIR


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_corpus_and_regressions_raise_only_typed_errors(target):
    files = targets.corpus_files(target)
    assert any(f.name.startswith("seed-") for f in files), f"no seeds for {target}"
    run_one = targets.TARGETS[target]()
    findings = []
    for f in files:
        try:
            run_one(f.read_bytes())
        except targets.Finding as e:
            findings.append(f"{f.relative_to(FUZZ_DIR)}: {e}")
    assert not findings, "\n".join(findings)


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
    assert total < 2_500_000, f"tests/fixtures/fuzz holds {total} bytes; minimize it (-merge=1)"


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
