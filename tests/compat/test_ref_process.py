"""The reference fork server (tests/support/ref_process.py) behaves as a fresh interpreter per
call: exit status, output, environment, working directory, timeouts, and no state carried from
one call to the next. Driven with this interpreter standing in for a reference venv's."""

from __future__ import annotations

import subprocess
import sys

import pytest
import ref_process

pytestmark = pytest.mark.usefixtures("forkserver_on")


@pytest.fixture
def forkserver_on(monkeypatch):
    monkeypatch.setenv(ref_process.SWITCH, "1")


def _py(*argv, **kw):
    return ref_process.run([sys.executable, *argv], timeout=kw.pop("timeout", 120), **kw)


def test_status_output_and_argv(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text("import sys\nprint('out', sys.argv[1:])\nprint('err', file=sys.stderr)\n"
                      "sys.exit(int(sys.argv[1]))\n")
    result = _py(script, "3", "x")
    assert (result.returncode, result.stdout, result.stderr) == (3, "out ['3', 'x']\n", "err\n")
    assert _py(script, "0").returncode == 0
    with pytest.raises(subprocess.CalledProcessError):
        _py(script, "1", check=True)


def test_exceptions_modules_and_code(tmp_path):
    failed = _py("-c", "raise ValueError('boom')")
    assert failed.returncode == 1 and "ValueError: boom" in failed.stderr
    assert _py("-c", "import sys; print(sys.argv[1:])", "a").stdout == "['a']\n"
    assert _py("-m", "json.tool", "--help").returncode == 0


def test_each_call_starts_clean(tmp_path):
    """What one call changes (a module's state, sys.modules, the environment, torch's random
    generator) is gone in the next: each call is a child forked from the same state."""
    code = ("import os, json, torch\n"
            "print(json.dumps([os.environ.get('ET_MARK'), float(torch.rand(1)),"
            " hasattr(json, 'mark')]))\n"
            "os.environ['ET_MARK'] = 'set'; json.mark = 1\n")
    first, second = _py("-c", code).stdout, _py("-c", code).stdout
    assert first == second
    assert first.startswith("[null, ") and first.endswith(", false]\n")


def test_env_cwd_and_timeout(tmp_path):
    out = _py("-c", "import os; print(os.environ['ET_MARK'], os.getcwd())",
              env={"ET_MARK": "given", "PATH": "/usr/bin"}, cwd=tmp_path).stdout
    assert out == f"given {tmp_path}\n"
    with pytest.raises(subprocess.TimeoutExpired):
        _py("-c", "import time; time.sleep(60)", timeout=2)
    assert _py("-c", "print('after')").stdout == "after\n"  # the server survives a timeout


def test_a_crashing_call_is_reported_and_the_next_one_runs():
    crashed = _py("-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert crashed.returncode == -11
    assert _py("-c", "print(2)").stdout == "2\n"


def test_calls_from_two_threads_each_get_a_server():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda k: _py("-c", f"import time; time.sleep(2); print({k})"),
                             range(2)))
    assert [o.stdout for o in outs] == ["0\n", "1\n"]
    assert len(ref_process._servers[sys.executable]) >= 2


def test_a_server_that_stops_answering_is_a_timeout_and_the_next_call_gets_a_new_one(
        monkeypatch):
    import os
    import signal

    _py("-c", "pass")  # a started server (its first job waits for the imports)
    (server,) = [s for s in ref_process._servers[sys.executable] if s.alive()][:1]
    monkeypatch.setattr(ref_process, "ANSWER_SLACK_S", 1.0)
    os.kill(server.proc.pid, signal.SIGSTOP)  # hung: neither answers nor dies
    with pytest.raises(subprocess.TimeoutExpired) as e:
        _py("-c", "print(1)", timeout=1)
    assert "did not answer in time" in e.value.stderr
    assert not server.alive()
    assert _py("-c", "print(3)").stdout == "3\n"
