"""Recipe sweeps: every candidate recipe exported, run and scored on the user's data.

Per candidate: the metric on the evaluation data (in edgetorch's runtime, the real program),
the ``.pte`` size, planned memory, latency as a ratio to the float program of the same backend
timed in the same process, and Vela's cycle estimate for Ethos-U targets. Rows are appended to
``<out>/results.jsonl`` as candidates finish, so a sweep that stops resumes where it was (a
finished candidate is not recomputed); ``results.csv`` holds the table, ``pareto.csv`` the
front, ``report.html`` both with plots.

Candidates run in local processes by default, on Ray with ``ray="auto"`` or an address: each
candidate one task, the evaluation data as object references (see :mod:`.executors`). Each
candidate evaluates single-threaded in a fresh worker, so its numbers do not depend on where it
ran; only the latencies are measurements.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import QuantDebugError
from .data import Sample, load_samples, shard
from .debugger import CALIBRATION_SAMPLES
from .evaluate import build, float_outputs, latency, load, runtime_outputs
from .executors import make_executor, resolve
from .metrics import resolve_metric
from .recipes import Recipe, arm_available, is_arm

DETERMINISTIC = ["key", "status", "metric", "float_metric", "pte_bytes", "planned_bytes",
                 "vela_cycles"]
DEFAULT_OBJECTIVES = {"metric": "max", "pte_bytes": "min", "planned_bytes": "min"}
MAX_ROWS = 10_000  # lines read back from results.jsonl


def default_grid(group_sizes: Sequence[int] = (32, 64, 128), qat: bool = False,
                 arm: bool | None = None) -> list[Recipe]:
    """The standard candidates (13 without QAT or Arm): fp32 portable and XNNPACK; XNNPACK
    static and dynamic, per channel and per tensor; portable static (both) and dynamic; XNNPACK
    8da8w and 8da4w per group size; QAT when a training function is given; Ethos-U55-128 and
    U85-256 static when the Arm extra is importable."""
    grid = [Recipe("fp32", "portable"), Recipe("fp32", "xnnpack")]
    for scheme in ("static", "dynamic"):
        for pc in (True, False):
            grid.append(Recipe(scheme, "xnnpack", per_channel=pc))
    grid += [Recipe("static", "portable", per_channel=True),
             Recipe("static", "portable", per_channel=False),
             Recipe("dynamic", "portable", per_channel=True), Recipe("8da8w", "xnnpack")]
    grid += [Recipe("8da4w", "xnnpack", group_size=g) for g in group_sizes]
    if qat:
        grid += [Recipe("qat", "xnnpack", per_channel=True), Recipe("qat", "xnnpack",
                                                                    per_channel=False)]
    if arm if arm is not None else arm_available():
        grid += [Recipe("static", "ethos-u55-128"), Recipe("static", "ethos-u85-256")]
    return grid


@dataclass
class SweepTask:
    """One candidate, as shipped to a worker (everything picklable)."""

    recipe: Recipe
    model: Any  # an nn.Module, a "path/to/file.py:factory" spec, or a zero-argument callable
    example: tuple[torch.Tensor, ...]
    shards: list[Any]  # lists of samples, or Ray references to them
    calibration: Any
    metric: Any
    fingerprint: str
    qat_train: Any = None  # a function, or a "path/to/file.py:function" spec
    latency_repeat: int = 5
    intermediates: str | None = None


def _qat_train(source: Any) -> Any:
    """The QAT fine-tune function; a spec string is imported here, in the worker (a function
    defined in a file run as a script does not pickle by reference)."""
    if isinstance(source, str):
        from ...examples import load_function_spec

        return load_function_spec(source)
    return source


def _model(source: Any) -> torch.nn.Module:
    if isinstance(source, torch.nn.Module):
        return source.eval()
    if isinstance(source, str):
        from ...examples import load_model_spec

        return load_model_spec(source)[0].eval()
    return source().eval()


_FLOAT: dict[tuple[str, str], tuple[list[np.ndarray], Any]] = {}


def _float_baseline(task: SweepTask, model: torch.nn.Module, samples: list[Sample]
                    ) -> tuple[list[np.ndarray], Any]:
    """Float outputs, and the float program of the candidate's backend loaded (the latency
    reference), once per process and model."""
    backend = task.recipe.backend if not is_arm(task.recipe.backend) else "portable"
    key = (task.fingerprint, backend)
    if key not in _FLOAT:
        reference = float_outputs(model, samples)
        _FLOAT[key] = (reference, load(build(Recipe("fp32", backend), model, task.example,
                                             []).pte))
    return _FLOAT[key]


def evaluate_candidate(task: SweepTask) -> dict[str, Any]:
    """Build, run and score one candidate; a failure is a row with ``status="failed"``."""
    row = _row_base(task.recipe)
    with _single_thread():
        try:
            row.update(_evaluate(task))
            row["status"] = "ok"
        except Exception as e:  # a candidate that fails is a result of the sweep, not its end
            row["status"] = "failed"
            row["error"] = f"{type(e).__name__}: {e}"[:2000]
            row["traceback"] = traceback.format_exc(limit=8)[-4000:]
    return row


def _evaluate(task: SweepTask) -> dict[str, Any]:
    model = _model(task.model)
    samples = [s for ref in task.shards for s in resolve(ref)]
    calibration = resolve(task.calibration)
    name, metric = resolve_metric(task.metric)
    reference, float_method = _float_baseline(task, model, samples)
    start = time.perf_counter()
    inter = None
    if is_arm(task.recipe.backend) and task.intermediates:
        inter = str(Path(task.intermediates) / task.recipe.key.replace("/", "_"))
    built = build(task.recipe, model, task.example, calibration, _qat_train(task.qat_train),
                  inter)
    built_s = time.perf_counter() - start
    method = load(built.pte, built.backend_options)
    value = metric(runtime_outputs(method, samples), samples, reference)
    float_value = metric(reference, samples, reference)
    lat, float_latency = latency([method, float_method], samples[0], task.latency_repeat)
    out = {"metric_name": name, "metric": float(value), "float_metric": float(float_value),
           "metric_drop": float(float_value - value), "pte_bytes": len(built.pte),
           "pte_kib": len(built.pte) / 1024, "planned_bytes": built.planned_bytes,
           "latency_ms": lat * 1e3, "float_latency_ms": float_latency * 1e3,
           "latency_ratio": lat / float_latency if not is_arm(task.recipe.backend) else math.nan,
           "vela_cycles": math.nan, "build_s": built_s, "samples": len(samples)}
    if task.recipe.backend.startswith("ethos-u"):
        from ...backends.arm.ethosu import vela_estimates

        out["vela_cycles"] = float(sum(e.get("cycles_total", 0) for e in
                                       vela_estimates(built.edge)))
    return out


def _row_base(recipe: Recipe) -> dict[str, Any]:
    return {"key": recipe.key, "backend": recipe.backend, "scheme": recipe.scheme,
            "per_channel": recipe.per_channel, "group_size": recipe.group_size,
            "float_modules": ",".join(recipe.float_modules), "status": "", "error": ""}


class _single_thread:
    """One thread for torch and for NumPy's BLAS while a candidate runs: its numbers are then
    the same in every process (and two workers do not fight over two cores)."""

    def __enter__(self) -> None:
        self.torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            self.limits = None
        else:
            self.limits = threadpool_limits(1)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.torch_threads)
        if self.limits is not None:
            self.limits.restore_original_limits()


# ---- the store -----------------------------------------------------------------------------


def fingerprint(model: torch.nn.Module, example: Sequence[torch.Tensor],
                samples: Sequence[Sample], metric: Any) -> str:
    """What a sweep folder's results depend on: the weights, shapes, data and metric."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    for t in example:
        h.update(f"{t.dtype}{list(t.shape)}".encode())
    for s in samples:
        for t in s.inputs:
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        if s.target is not None:
            h.update(np.asarray(s.target).tobytes())
    h.update(resolve_metric(metric)[0].encode())
    return h.hexdigest()[:16]


class ResultStore:
    """``results.jsonl`` in the sweep folder, tied to one setup by ``sweep.json``."""

    def __init__(self, folder: str | Path, fingerprint: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "results.jsonl"
        meta = self.folder / "sweep.json"
        if meta.exists():
            stored = json.loads(meta.read_text(encoding="utf-8")[:10_000])
            if stored.get("fingerprint") != fingerprint:
                raise QuantDebugError(
                    f"{self.folder} holds a sweep of another model, data or metric "
                    f"(fingerprint {stored.get('fingerprint')} != {fingerprint}); use a new "
                    "folder or delete it")
        else:
            meta.write_text(json.dumps({"fingerprint": fingerprint}), encoding="utf-8")

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        with self.path.open(encoding="utf-8") as f:
            for n, line in enumerate(f):
                if n >= MAX_ROWS:
                    break
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash: that candidate runs again
                if isinstance(row, dict) and isinstance(row.get("key"), str):
                    out.append(row)
        return out

    def add(self, row: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


# ---- Pareto ------------------------------------------------------------------------------


def pareto(df: Any, objectives: dict[str, str] | None = None) -> Any:
    """The candidates no other candidate beats on every objective (``{column: "max"|"min"}``)."""
    objectives = objectives or DEFAULT_OBJECTIVES
    ok = df[df.status == "ok"].reset_index(drop=True)
    signs = {c: (1.0 if d == "max" else -1.0) for c, d in objectives.items()}
    values = np.array([[signs[c] * float(v) for c, v in zip(signs, vals)]
                       for vals in ok[list(signs)].itertuples(index=False)]) \
        if len(ok) else np.zeros((0, len(signs)))
    values = np.nan_to_num(values, nan=-np.inf)
    keep = []
    for i in range(len(values)):
        dominated = np.any(np.all(values >= values[i], axis=1) & np.any(values > values[i], axis=1))
        if not dominated:
            keep.append(i)
    front = ok.iloc[keep]
    if "metric" not in front.columns:  # no candidate ran: the rows of failures have no scores
        return front.reset_index(drop=True)
    return front.sort_values("metric", ascending=False).reset_index(drop=True)


@dataclass
class SweepResult:
    table: Any
    front: Any
    folder: Path
    metric: str
    objectives: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_OBJECTIVES))

    def plot(self, path: str | Path | None = None):
        """The metric against .pte size and latency, the front ringed (a matplotlib Figure)."""
        from .plots import pareto_figure, saved

        return saved(pareto_figure(self.table, "metric", set(self.front.key)), path)

    def to_html(self, path: str | Path | None = None) -> str:
        """One self-contained HTML page: the front, its plot and every candidate."""
        from .html import SweepPage, written

        return written(SweepPage(self).render(), path)


def sweep(model: Any, example_inputs: Sequence[torch.Tensor], data: Any,
          recipes: Sequence[Recipe | str] | None = None, *, metric: Any = "top1",
          out_dir: str | Path = "quant-sweep", calibration: Any = None, targets: Any = None,
          workers: int | None = None, ray: str | None = None, shards: int | None = None,
          max_samples: int | None = None, qat_train: Callable | str | None = None,
          latency_repeat: int = 5, objectives: dict[str, str] | None = None,
          retry_failed: bool = False, show_progress: bool = True) -> SweepResult:
    """Run every recipe on ``data`` and score it (see the module docstring). ``model`` is an
    ``nn.Module``, a ``path/to/file.py:factory`` spec or a zero-argument callable;
    ``qat_train`` (for ``qat`` recipes) a function ``(prepared, calibration_samples)`` or a
    ``path/to/file.py:function`` spec."""
    import pandas as pd

    from .progress import progress_bar

    example = tuple(example_inputs)
    _qat_train(qat_train)  # a spec that names no function fails here, not in every candidate
    float_model = _model(model)
    samples = load_samples(data, example, max_samples=max_samples, targets=targets)
    calib = load_samples(calibration, example) if calibration is not None \
        else samples[:CALIBRATION_SAMPLES]
    grid = [Recipe.parse(r) if isinstance(r, str) else r
            for r in (recipes or default_grid(qat=qat_train is not None))]
    keys = [r.key for r in grid]
    if len(set(keys)) != len(keys):
        raise QuantDebugError(f"the recipes repeat a candidate: {keys}")
    fp = fingerprint(float_model, example, samples, metric)
    store = ResultStore(out_dir, fp)
    done = {r["key"]: r for r in store.rows()
            if r.get("status") == "ok" or (r.get("status") == "failed" and not retry_failed)}
    todo = [r for r in grid if r.key not in done]
    executor = make_executor(ray, workers)
    try:
        refs = [executor.put(part) for part in shard(samples, shards or 2)]
        calib_ref = executor.put(calib)
        tasks = [SweepTask(r, model, example, refs, calib_ref, metric, fp, qat_train,
                           latency_repeat, str(Path(out_dir) / "intermediates"))
                 for r in todo]
        bar = progress_bar(executor.map_unordered(evaluate_candidate, tasks), desc="quant sweep",
                           total=len(tasks), unit="recipe") if show_progress and tasks \
            else executor.map_unordered(evaluate_candidate, tasks)
        for row in bar:
            store.add(row)
            done[row["key"]] = row
    finally:
        executor.close()
    rows = [done[k] for k in keys if k in done]
    table = pd.DataFrame(rows)
    table.to_csv(Path(out_dir) / "results.csv", index=False)
    front = pareto(table, objectives)
    front.to_csv(Path(out_dir) / "pareto.csv", index=False)
    result = SweepResult(table, front, Path(out_dir), resolve_metric(metric)[0],
                         dict(objectives or DEFAULT_OBJECTIVES))
    result.to_html(Path(out_dir) / "report.html")
    return result
