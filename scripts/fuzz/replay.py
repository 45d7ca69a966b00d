"""Replay a target's corpus and regression inputs (or the given files), one line per file.

    python scripts/fuzz/replay.py TARGET [FILE ...]

Prints ``start <name>`` before each file and ``ok <name> cpu=<seconds>`` or ``finding <name>
<message>`` after it, flushed, so that a parent process can put a time bound on each file and name the one
that hung or crashed the interpreter (``tests/reliability/test_fuzz_corpus.py`` does). A seed
(``seed-*``) of a target in ``targets.SEEDS_RUN_CLEAN`` must run without any error at all.
Exits 1 when any file was a finding.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str]) -> int:
    import targets

    target, named = argv[0], [Path(a) for a in argv[1:]]
    files = named or targets.corpus_files(target)
    run_one = targets.TARGETS[target]()
    findings = 0
    for f in files:
        name = f.relative_to(targets.FUZZ_DIR) if f.is_relative_to(targets.FUZZ_DIR) else f
        print(f"start {name}", flush=True)
        targets.STRICT = f.name.startswith("seed-") and target in targets.SEEDS_RUN_CLEAN
        cpu = time.process_time()
        try:
            run_one(f.read_bytes())
        except targets.Finding as e:
            findings += 1
            message = " ".join(str(e).split())[:500]
            print(f"finding {name} {message}", flush=True)
            continue
        print(f"ok {name} cpu={time.process_time() - cpu:.3f}", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
