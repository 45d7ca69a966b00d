"""Run a script under a reference interpreter (``.venv-ref``, ``.venv-ref-arm``, ...) as
``subprocess.run([python, *argv], capture_output=True, text=True, timeout=...)`` would, through one
fork server per interpreter and test process (``ref_forkserver.py``): torch and ExecuTorch are
imported once, and each call runs in a child forked from that state, so it still starts clean.

``EDGETORCH_REF_FORKSERVER=0`` turns the server off (a fresh interpreter per call, as before).
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import tempfile
import threading
from pathlib import Path

SERVER = Path(__file__).resolve().with_name("ref_forkserver.py")
SWITCH = "EDGETORCH_REF_FORKSERVER"
# What reference calls import anyway, so each call finds them imported. ``module@pkg`` is
# preloaded only where ``pkg`` is installed, ``module@!pkg`` only where it is not: the Arm
# reference venvs (tosa-tools) get the Arm backend, the others XNNPACK and the devtools, so no
# call finds a backend registered that its own imports would not have brought in.
PRELOAD = ("torch", "torchao.quantization.pt2e.quantize_pt2e", "executorch.exir",
           # ExecuTorch's OpenvinoBackend looks for libopenvino_c once, when the runtime loads:
           # in the OpenVINO venv a call imports the runtime itself, after openvino
           "executorch.runtime@!openvino",
           "executorch.backends.arm.quantizer@tosa_serializer",
           "executorch.backends.arm.tosa.partitioner@tosa_serializer",
           "executorch.backends.xnnpack.partition.xnnpack_partitioner@!tosa_serializer",
           "executorch.devtools@!tosa_serializer")
_START_TIMEOUT_S = 900.0
ANSWER_SLACK_S = 30.0  # beyond a job's own timeout, how long the server may take to answer


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


def run(cmd: list, *, timeout: float | None = None, env: dict[str, str] | None = None,
        cwd: str | os.PathLike | None = None, check: bool = False, **_output
        ) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, ...)`` for ``cmd = [python, *argv]``
    (the output is always captured, as text; ``stdout=``/``capture_output=`` are accepted and
    ignored); raises ``subprocess.TimeoutExpired`` and, with ``check``,
    ``subprocess.CalledProcessError``."""
    cmd = [str(c) for c in cmd]
    timeout = 3600.0 if timeout is None else float(timeout)
    if not enabled():
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                                cwd=cwd)
    else:
        server = _acquire(cmd[0])
        try:
            result = server.call(cmd, cmd[1:], timeout, clean_env(env), cwd)
        finally:
            server.lock.release()
    if check:
        result.check_returncode()
    return result


class _Server:
    def __init__(self, python: str, env: dict[str, str]):
        self.lock = threading.Lock()
        self.tmp = tempfile.TemporaryDirectory(prefix="edgetorch-refserver-")
        self.log = open(Path(self.tmp.name) / "server.log", "w+b")  # noqa: SIM115
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [python, str(SERVER), "--answer-fd", str(write_fd), "--preload", ",".join(PRELOAD)],
            stdin=subprocess.PIPE, stdout=self.log, stderr=self.log, pass_fds=(write_fd,),
            env=env, text=True)
        os.close(write_fd)
        self.answers = os.fdopen(read_fd, "r")
        self.jobs = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, cmd, argv, timeout, env, cwd) -> subprocess.CompletedProcess:
        """One job; the caller holds ``self.lock``."""
        self.jobs += 1
        out = Path(self.tmp.name) / f"job{self.jobs}.out"
        err = Path(self.tmp.name) / f"job{self.jobs}.err"
        job = {"argv": [str(a) for a in argv], "env": env, "timeout": timeout,
               "cwd": str(cwd or os.getcwd()), "out": str(out), "err": str(err)}
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except OSError:
            return self._died(cmd)
        # the server starts with the imports; after that the job's own timeout applies
        wait = timeout + (_START_TIMEOUT_S if self.jobs == 1 else ANSWER_SLACK_S)
        line = self._answer(wait)
        if line is _NO_ANSWER:  # the server itself hung (its job's own timeout did not fire)
            hung = self._died(cmd, "did not answer in time")
            raise subprocess.TimeoutExpired(cmd, wait, output="", stderr=hung.stderr)
        if line is None:
            return self._died(cmd)
        answer = json.loads(line)
        stdout = out.read_text(errors="replace") if out.exists() else ""
        stderr = err.read_text(errors="replace") if err.exists() else ""
        for path in (out, err):
            path.unlink(missing_ok=True)
        if answer["timed_out"]:
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(cmd, answer["returncode"], stdout, stderr)

    def _answer(self, timeout: float) -> str | None:
        """The server's answer line; None when it died, ``_NO_ANSWER`` when none came in time."""
        with selectors.DefaultSelector() as sel:
            sel.register(self.answers, selectors.EVENT_READ)
            if not sel.select(timeout):
                return _NO_ANSWER
        return self.answers.readline() or None

    def _died(self, cmd, what: str = "died") -> subprocess.CompletedProcess:
        self.close()
        self.log.seek(0)
        log = self.log.read().decode(errors="replace")[-6000:]
        return subprocess.CompletedProcess(cmd, self.proc.returncode or -1, "",
                                           f"reference fork server {what}:\n{log}")

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()


_NO_ANSWER = "<no answer>"  # (a marker: a real answer is a JSON line)
_servers: dict[str, list[_Server]] = {}
_servers_lock = threading.Lock()


def _acquire(python: str) -> _Server:
    """A live, idle server for ``python``, its lock held: calls from several threads (the
    delegate tests export two models at a time) each get a server of their own."""
    with _servers_lock:
        pool = _servers.setdefault(python, [])
        pool[:] = [s for s in pool if s.alive() or s.lock.locked()]
        for server in pool:
            if server.lock.acquire(blocking=False):
                if server.alive():
                    return server
                server.lock.release()
        server = _Server(python, clean_env())
        server.lock.acquire()
        pool.append(server)
        return server


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (the process's environment by default) without our venv's variables, which would
    point a reference interpreter at our site-packages."""
    env = dict(os.environ if env is None else env)
    for key in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(key, None)
    return env


@atexit.register
def _shutdown() -> None:
    for pool in _servers.values():
        for server in pool:
            server.close()
