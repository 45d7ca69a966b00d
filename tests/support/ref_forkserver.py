"""A fork server for the reference venvs (standard library only; runs under their interpreter).

Every ExecuTorch reference call of the suite used to start a fresh interpreter, and importing
torch and ExecuTorch took about 20 of the ~28 CPU seconds of a small model's reference export.
This process imports them once (``--preload``), then runs each job in a child forked from that
state: the child starts as a fresh ``python SCRIPT ARGS`` would after those imports (nothing a
job changes reaches the next one), with its own stdout/stderr files and exit status.

Protocol (driven by ``ref_process.py``): one JSON request per line on stdin,
``{"argv": [...], "env": {...} | null, "cwd": str, "timeout": float, "out": str, "err": str}``,
``argv`` as after ``python`` (``["script.py", ...]``, ``["-m", "module", ...]`` or
``["-c", "code", ...]``); one JSON
answer per line on the descriptor given by ``--answer-fd``:
``{"returncode": int, "timed_out": bool}``. The child's output goes to the ``out``/``err`` files.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import runpy
import signal
import sys
import time


def _child(job: dict) -> None:
    """In the forked child: become ``python *argv`` and exit with its status."""
    for fd, path in ((1, job["out"]), (2, job["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if job.get("env") is not None:
        os.environ.clear()
        os.environ.update(job["env"])
    os.chdir(job["cwd"])
    argv = list(job["argv"])
    code = 0
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path.insert(0, "")
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path.insert(0, job["cwd"])
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(argv[0])
            sys.argv = [script, *argv[1:]]
            sys.path.insert(0, os.path.dirname(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - reported as a failed run, like the interpreter does
        import traceback

        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answer-fd", type=int, required=True)
    parser.add_argument("--preload", default="")
    args = parser.parse_args()
    answers = os.fdopen(args.answer_fd, "w", buffering=1)
    for item in filter(None, args.preload.split(",")):
        name, _, condition = item.partition("@")
        if condition and (importlib.util.find_spec(condition.lstrip("!")) is None) != (
                condition.startswith("!")):
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a job that needs it reports the real error
            print(f"ref_forkserver: preload {name} failed: {exc!r}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            answers.close()
            _child(job)
        code, timed_out = _wait(pid, float(job["timeout"]))
        answers.write(json.dumps({"returncode": code, "timed_out": timed_out}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
