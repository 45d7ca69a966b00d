"""The atheris (libFuzzer) driver behind every ``fuzz_<target>.py`` (targets: ``targets.TARGETS``).

    python scripts/fuzz/fuzz_pte.py [libFuzzer flags] [CORPUS_DIR ...]

With no corpus directory given, a scratch copy of the checked-in corpus
(``tests/fixtures/fuzz/<target>`` plus its regressions) is used, so a run never writes into the
repository. Limits: ``RLIMIT_AS`` (``EDGETORCH_FUZZ_MEM_MB``, default 3072) bounds what any
input can make the process allocate; libFuzzer's ``-timeout`` (default here 10 s) bounds each
input's time (``-rss_limit_mb``, set by ``run_campaign.py``, the process's resident memory).
A finding (see ``targets.check``) raises, and libFuzzer saves the input as ``crash-<sha1>``
(``-artifact_prefix``); copy it to ``tests/fixtures/fuzz/regressions/<target>/``.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

# One BLAS thread: several fuzzers share the machine, and RLIMIT_AS counts every thread's stack.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# A load pass that fails on a file is a finding (it must decline what it cannot take): strict
# mode raises it as an OptimizationError where users get a warning and the pass skipped.
os.environ.setdefault("EDGETORCH_OPTIMIZE_STRICT", "1")

import atheris  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _limit_memory() -> int:
    mb = int(os.environ.get("EDGETORCH_FUZZ_MEM_MB", "3072"))
    resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    return mb


def main(target: str) -> None:
    # Everything the target imports is instrumented: edgetorch (and, per target, the library
    # whose paths the input drives, e.g. jinja2 for chat templates).
    import importlib

    with atheris.instrument_imports(include=["edgetorch", "targets"]):
        targets = importlib.import_module("targets")
    with atheris.instrument_imports(include=["edgetorch", *targets.INSTRUMENT.get(target, [])]):
        if target in ("pte", "ptd", "xnnpack", "bpte"):
            importlib.import_module("edgetorch.backends.xnnpack.runtime")
        run_one = targets.TARGETS[target]()
    args = list(sys.argv)
    if not any(a.startswith("-timeout=") for a in args):
        args.append("-timeout=10")
    if not any(not a.startswith("-") for a in args[1:]):
        scratch = Path(tempfile.mkdtemp(prefix=f"edgetorch-fuzz-{target}-"))
        for f in targets.corpus_files(target):
            shutil.copy(f, scratch / f.name)
        args.append(str(scratch))
        print(f"corpus: {scratch} ({len(list(scratch.iterdir()))} files)", file=sys.stderr)
    mb = _limit_memory()
    print(f"target {target}: RLIMIT_AS {mb} MB", file=sys.stderr)

    def test_one_input(data: bytes) -> None:
        run_one(data)  # a Finding (or anything else escaping) is a crash for libFuzzer

    mutator = targets.MUTATORS.get(target)
    atheris.Setup(args, test_one_input, **({"custom_mutator": mutator} if mutator else {}))
    atheris.Fuzz()
