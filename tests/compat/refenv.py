"""Drive the real ExecuTorch (in the reference venv) from our test process, via subprocess.

Our venv must never import ``executorch``; everything ExecuTorch does for the tests happens in
``ref_tool.py`` running under the reference interpreter, found in this order:

1. ``$EDGETORCH_REF_PYTHON`` (used as given, even if missing -- then nothing is available),
2. ``<repo>/.venv-ref/bin/python`` (what ``scripts/setup_ref_env.sh`` creates),
3. ``/work/.venv-ref/bin/python``.

Data crosses the process boundary as ``.npz`` files with positional arrays ``arr_0, arr_1, ...``.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import ref_process

REPO_ROOT = Path(__file__).resolve().parents[2]
REF_TOOL = Path(__file__).resolve().with_name("ref_tool.py")
ENV_VAR = "EDGETORCH_REF_PYTHON"
_FALLBACK_PYTHONS = (REPO_ROOT / ".venv-ref/bin/python", Path("/work/.venv-ref/bin/python"))

# Exporting MobileNetV2/ResNet-18 through to_edge takes tens of seconds; allow generous slack.
EXPORT_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 600.0
STATS_TIMEOUT_S = 300.0


class RefToolError(RuntimeError):
    """The reference tool failed, timed out, or the reference python is unavailable."""


@dataclass(frozen=True)
class RefExport:
    """Files written by ``ref_export``: the .pte and its example inputs / eager outputs."""

    pte: Path
    inputs_npz: Path
    expected_npz: Path

    def inputs(self) -> list[np.ndarray]:
        """The example inputs the model was exported with, in positional order."""
        return load_npz(self.inputs_npz)

    def expected(self) -> list[np.ndarray]:
        """The eager PyTorch outputs for those inputs (flattened pytree order)."""
        return load_npz(self.expected_npz)


def ref_python() -> Path:
    """Path of the reference interpreter (it may not exist; see :func:`ref_available`)."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    for candidate in _FALLBACK_PYTHONS:
        if candidate.exists():
            return candidate
    return _FALLBACK_PYTHONS[0]


EXPECTED_VERSION = "1.5.1"


def in_ci() -> bool:
    """True under CI (``CI=true``, as GitHub Actions, GitLab and most runners set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def ref_available() -> bool:
    """True when the reference python exists and has ``executorch`` 1.5.1 installed."""
    return ref_status()[0]


def ref_status() -> tuple[bool, str]:
    """``(usable, why)`` for the reference environment; ``why`` says what is missing or broken.

    Outside CI the check is cheap (the package's metadata). Under CI it also imports
    ExecuTorch's runtime and exir once, so a broken install fails the run at the first
    compatibility test instead of letting the suite go green without checking anything.
    """
    return _probe(str(ref_python()), in_ci())


# Metadata only: importing executorch (and torch) would take seconds.
_CHEAP_PROBE = (
    "import importlib.metadata as m, sys\n"
    "try:\n    v = m.version('executorch')\n"
    "except m.PackageNotFoundError:\n    sys.exit('executorch is not installed')\n"
    "sys.exit(0 if v == sys.argv[1] else f'executorch {v} is installed, {sys.argv[1]} expected')\n"
)
_DEEP_PROBE = _CHEAP_PROBE.replace(
    "sys.exit(0 if", "import executorch.runtime, executorch.exir\nsys.exit(0 if"
)


@functools.cache
def _probe(python: str, deep: bool) -> tuple[bool, str]:
    if not Path(python).exists():
        return False, f"reference python {python} does not exist"
    try:
        result = subprocess.run(
            [python, "-c", _DEEP_PROBE if deep else _CHEAP_PROBE, EXPECTED_VERSION],
            env=_clean_env(), capture_output=True, text=True, timeout=300 if deep else 60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"reference python {python} could not be run: {exc}"
    if result.returncode != 0:
        return False, f"reference python {python}: {_tail(result.stderr, 1500).strip()}"
    return True, f"reference python {python} (executorch {EXPECTED_VERSION})"


def ref_export(model_name: str, out_path: str | os.PathLike, xnnpack: bool = False) -> RefExport:
    """Export ``model_name`` (example name or ``file.py:factory``) with ExecuTorch's own exir.

    Writes ``out_path`` (.pte) plus ``.inputs.npz`` / ``.expected.npz`` beside it.
    """
    pte = Path(out_path)
    args = ["export", model_name, str(pte)] + (["--xnnpack"] if xnnpack else [])
    _run_tool(args, EXPORT_TIMEOUT_S)
    return RefExport(pte, pte.with_suffix(".inputs.npz"), pte.with_suffix(".expected.npz"))


def ref_run(
    pte_path: str | os.PathLike, inputs: Sequence[np.ndarray], method: str = "forward"
) -> list[np.ndarray]:
    """Run ``method`` of a .pte in ExecuTorch's runtime and return its outputs."""
    with tempfile.TemporaryDirectory(prefix="edgetorch-ref-") as tmp:
        in_npz, out_npz = Path(tmp) / "inputs.npz", Path(tmp) / "outputs.npz"
        np.savez(in_npz, *inputs)
        _run_tool(
            ["run", str(pte_path), str(in_npz), str(out_npz), "--method", method], RUN_TIMEOUT_S
        )
        return load_npz(out_npz)


def ref_time(
    pte_path: str | os.PathLike, inputs: Sequence[np.ndarray], runs: int, method: str = "forward"
) -> dict:
    """Time ``runs`` executions in ExecuTorch's runtime (after one warm-up); returns ms stats."""
    with tempfile.TemporaryDirectory(prefix="edgetorch-ref-") as tmp:
        in_npz, out_npz = Path(tmp) / "inputs.npz", Path(tmp) / "outputs.npz"
        json_out = Path(tmp) / "timing.json"
        np.savez(in_npz, *inputs)
        args = ["run", str(pte_path), str(in_npz), str(out_npz), "--method", method]
        _run_tool(args + ["--time", str(runs), "--json", str(json_out)], RUN_TIMEOUT_S)
        return json.loads(json_out.read_text())


def ref_stats(pte_path: str | os.PathLike) -> dict:
    """ExecuTorch's view of a .pte: file size, per-method operators, instructions, buffers."""
    with tempfile.TemporaryDirectory(prefix="edgetorch-ref-") as tmp:
        json_out = Path(tmp) / "stats.json"
        _run_tool(["stats", str(pte_path), "--json", str(json_out)], STATS_TIMEOUT_S)
        return json.loads(json_out.read_text())


REF_FEATURES = Path(__file__).with_name("ref_features.py")


def ref_feature_export(feature: str, outdir: str | os.PathLike) -> Path:
    """ExecuTorch's ``.pte`` (and ``.ptd`` files) for a feature of ``feature_models``."""
    _run_tool(["export", feature, str(outdir)], EXPORT_TIMEOUT_S, REF_FEATURES)
    return Path(outdir) / f"{feature}.pte"


def ref_feature_run(feature: str, pte: str | os.PathLike, ptd: str | os.PathLike | None = None
                    ) -> list[np.ndarray]:
    """Run a feature's scenario in ExecuTorch's runtime; outputs in call order."""
    with tempfile.TemporaryDirectory(prefix="edgetorch-ref-") as tmp:
        out = Path(tmp) / "out.npz"
        extra = ["--ptd", str(ptd)] if ptd else []
        _run_tool(["run", feature, str(pte), str(out), *extra], RUN_TIMEOUT_S, REF_FEATURES)
        return load_npz(out)


def load_npz(path: str | os.PathLike) -> list[np.ndarray]:
    """Load positional arrays ``arr_0, arr_1, ...`` from an npz, in numeric order."""
    with np.load(path, allow_pickle=False) as data:
        return [data[n] for n in sorted(data.files, key=lambda n: int(n.rpartition("_")[2]))]


def _clean_env() -> dict[str, str]:
    return ref_process.clean_env()


def _run_tool(args: list[str], timeout: float, tool: Path | None = None) -> subprocess.CompletedProcess:
    python = ref_python()
    usable, why = ref_status()
    if not usable:
        raise RefToolError(f"{why}; run scripts/setup_ref_env.sh or set {ENV_VAR}")
    cmd = [str(python), str(tool or REF_TOOL), *args]
    try:
        result = ref_process.run(
            cmd, env=_clean_env(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise RefToolError(
            f"timed out after {timeout:.0f}s: {' '.join(cmd)}\n{_tail(exc.stderr)}"
        ) from None
    if result.returncode != 0:
        raise RefToolError(
            f"exit status {result.returncode}: {' '.join(cmd)}\n"
            f"--- stderr ---\n{_tail(result.stderr)}"
        )
    return result


def _tail(text: str | bytes | None, limit: int = 6000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text if len(text) <= limit else "...\n" + text[-limit:]


REF_OPERATORS = Path(__file__).with_name("ref_operators.py")


def ref_operator_names() -> dict[str, list[str]]:
    """The operators ExecuTorch's runtime registers, by kernel set (see ``ref_operators.py``)."""
    with tempfile.TemporaryDirectory(prefix="edgetorch-ref-") as tmp:
        out = Path(tmp) / "operators.json"
        _run_tool([str(out)], STATS_TIMEOUT_S, REF_OPERATORS)
        return json.loads(out.read_text())


REF_OPLIST = Path(__file__).with_name("ref_oplist.py")


def ref_gen_oplist(pte: str | os.PathLike, out: str | os.PathLike) -> str:
    """The selected_operators.yaml text ExecuTorch's ``gen_oplist.py`` writes for ``pte``."""
    _run_tool([str(pte), str(out)], STATS_TIMEOUT_S, REF_OPLIST)
    return Path(out).read_text()


REF_DEVICE = Path(__file__).with_name("ref_device.py")


def ref_device_export(out: str | os.PathLike) -> Path:
    """ExecuTorch's device-planned ``.pte`` for ``feature_models.device_programs``."""
    _run_tool(["export", str(out)], EXPORT_TIMEOUT_S, REF_DEVICE)
    return Path(out)


def ref_device_run(pte: str | os.PathLike) -> dict:
    """Load a device-planned ``.pte`` in ExecuTorch's runtime (see ref_device.py ``run``)."""
    with tempfile.TemporaryDirectory(prefix="edgetorch-ref-") as tmp:
        out = Path(tmp) / "out.json"
        _run_tool(["run", str(pte), str(out)], RUN_TIMEOUT_S, REF_DEVICE)
        return json.loads(out.read_text())
