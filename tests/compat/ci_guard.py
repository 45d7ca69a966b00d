"""pytest hooks that keep the suite from going green without checking anything against ExecuTorch.

A compatibility case is a test marked ``compat``, or any test skipped because the reference
environment is missing or broken (some fixtures skip for that reason without the mark).

- Under CI (``CI=true``) such a skip is turned into a failure that says why the reference
  environment is unusable; a compatibility test module (``compat/test_*.py``) skipped at import fails the same way.
- Outside CI skipping stays allowed, but the end of the run says so loudly.
- Either way, the terminal summary prints how many compatibility cases ran.

``tests/conftest.py`` imports these hooks; ``tests/reliability/test_ci_guard.py`` runs them in an
inner pytest.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from refenv import ENV_VAR, in_ci, ref_status

# Skip reasons that mean "the reference environment is not there" (ours and the fixtures').
_REF_REASON = re.compile(
    r"reference\s+(executorch|python|env|environment|venv)\b|" + ENV_VAR, re.IGNORECASE
)

_stats: Counter = Counter()
_skipped: list[str] = []


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_message(what: str, reason: str) -> str:
    usable, why = ref_status()
    state = "" if usable else f"\nreference environment: {why}"
    return (f"{what} was skipped under CI ({reason}).{state}\n"
            f"CI must check files against ExecuTorch: install it with scripts/setup_ref_env.sh "
            f"(or `make ref`) or point {ENV_VAR} at its python.")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    compat = item.get_closest_marker("compat") is not None
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if compat or _REF_REASON.search(reason):
            _stats["skipped"] += 1
            _skipped.append(f"{item.nodeid}: {reason}")
            if in_ci():
                report.outcome = "failed"
                report.longrepr = _fail_message(item.nodeid, reason)
                _stats["skipped_failed"] += 1
        return
    if not compat:
        return
    if report.when == "call":
        _stats["xfailed" if hasattr(report, "wasxfail") else report.outcome] += 1
    elif report.failed:  # an error in setup or teardown
        _stats["errors"] += 1


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    path = Path(str(getattr(collector, "path", "") or ""))
    if (report.skipped and path.name.startswith("test_") and path.parent.name == "compat"):
        reason = _skip_reason(report)
        _stats["modules_skipped"] += 1
        _skipped.append(f"{path.name} (whole module): {reason}")
        if in_ci():
            report.outcome = "failed"
            report.longrepr = _fail_message(f"compatibility module {path.name}", reason)


def pytest_sessionfinish(session, exitstatus):
    """Under pytest-xdist, a worker hands its counts to the controller (``make test`` runs
    the suite on two workers), which prints the one summary."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["ci_guard"] = {"stats": dict(_stats), "skipped": list(_skipped)}


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown (and unused) without xdist
def pytest_testnodedown(node, error):
    data = getattr(node, "workeroutput", {}).get("ci_guard")
    if data:
        _stats.update(data["stats"])
        _skipped.extend(data["skipped"])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    ran = _stats["passed"] + _stats["failed"] + _stats["xfailed"]
    if not ran and not _skipped and not _stats["errors"]:
        return  # no compatibility case selected (e.g. -m "not compat")
    tr = terminalreporter
    usable, why = ref_status()
    parts = [f"{_stats[k]} {k}" for k in ("passed", "failed", "xfailed", "errors") if _stats[k]]
    tr.write_sep("=", "ExecuTorch compatibility", bold=True)
    tr.write_line(f"compatibility cases that ran: {ran}" + (f" ({', '.join(parts)})" if parts else ""))
    tr.write_line(why)
    if not _skipped:
        return
    verdict = "FAILED (CI)" if in_ci() else "SKIPPED -- NOT checked against ExecuTorch"
    tr.write_sep("!", f"{len(_skipped)} compatibility cases {verdict}", red=True, bold=True)
    for line in _skipped[:10]:
        tr.write_line(f"  {line}", red=True)
    if len(_skipped) > 10:
        tr.write_line(f"  ... and {len(_skipped) - 10} more", red=True)
    if not in_ci():
        tr.write_line("Under CI (CI=true) these skips fail the run. Set up the reference "
                      f"environment (scripts/setup_ref_env.sh) or set {ENV_VAR}.", red=True)
