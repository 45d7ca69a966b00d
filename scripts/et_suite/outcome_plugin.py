"""pytest plugin of a stage (``-p et_suite_outcomes``): one JSON line per event, as it happens.

A test that aborts the interpreter (ExecuTorch's runtime asserts with SIGABRT) or hangs loses
nothing but itself: the runner reads ``start`` lines without an outcome to name the culprit,
then runs the file again with the finished tests (and the culprit) in ``ET_SUITE_SKIP``.

Environment: ``ET_SUITE_LOG`` (the JSON-lines file to append to), ``ET_SUITE_SKIP`` (a file of
node ids to deselect, one a line), ``ET_SUITE_MARKER`` (keep only tests carrying one of these
markers, comma-separated), ``ET_SUITE_KEYWORD`` (keep only tests whose node id holds this text,
case-insensitive).
"""

import json
import os

import pytest

_LOG = os.environ.get("ET_SUITE_LOG")


def _write(record):
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _reason(report):
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    lines = [line for line in str(longrepr).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def pytest_collection_modifyitems(config, items):
    skip_file = os.environ.get("ET_SUITE_SKIP")
    skipped = set()
    if skip_file and os.path.exists(skip_file):
        with open(skip_file, encoding="utf-8") as f:
            skipped = {line.strip() for line in f if line.strip()}
    markers = [m for m in os.environ.get("ET_SUITE_MARKER", "").split(",") if m]
    keyword = os.environ.get("ET_SUITE_KEYWORD", "").lower()
    keep, drop = [], []
    for item in items:
        unwanted = markers and not any(item.get_closest_marker(m) for m in markers)
        unwanted = unwanted or bool(keyword) and keyword not in item.nodeid.lower()
        (drop if item.nodeid in skipped or unwanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collectreport(report):
    # every collected file is logged: progress for the runner's hang watchdog
    _write({"collect": report.nodeid, "reason": _reason(report)[:400] if report.failed else ""})


def pytest_runtest_logstart(nodeid, location):
    _write({"start": nodeid})


def pytest_runtest_logfinish(nodeid, location):
    _write({"end": nodeid})


def pytest_runtest_logreport(report):
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    elif report.when != "call" and report.failed:
        outcome = "error"
    elif report.when != "call" and report.passed:
        return  # setup/teardown that passed says nothing about the test
    _write({"nodeid": report.nodeid, "when": report.when, "outcome": outcome,
            "reason": _reason(report)[:400] if outcome != "passed" else "",
            "seconds": round(report.duration, 3)})


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _write({"finished": int(exitstatus)})


def pytest_configure(config):
    """With ``ET_SUITE_PTE_DIR`` set (edgetorch's side), keep every ``.pte`` a test builds, so
    the runner can run them all in ExecuTorch's runtime afterwards (``--check-pte-in-ref``)."""
    folder = os.environ.get("ET_SUITE_PTE_DIR")
    if not folder:
        return
    import hashlib

    from edgetorch.exir.program._program import ExecutorchProgramManager

    original = ExecutorchProgramManager.buffer.fget
    os.makedirs(folder, exist_ok=True)

    def buffer(self):
        data = original(self)
        digest = hashlib.sha256(data).hexdigest()[:20]
        path = os.path.join(folder, digest + ".pte")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(data)
            with open(os.path.join(folder, "index.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"pte": digest + ".pte",
                                    "test": os.environ.get("PYTEST_CURRENT_TEST", "")}) + "\n")
        return data

    ExecutorchProgramManager.buffer = property(buffer)
