"""The runtime ``VgfBackend``: VGF delegates run on a PC from the TOSA graph they were converted
from, with tosa-tools' reference model (the ``.vgf`` holds SPIR-V for a Vulkan ML device).

The TOSA graph is found, in order: in ``backend_options={"VgfBackend": {"tosa_graphs":
{sha256(blob): tosa}}}``; made by this very process (``vgf.compiled``); in an intermediates
folder -- the ``intermediates`` option, ``$EDGETORCH_VGF_INTERMEDIATES``, else the delegate's
stored ``debug_artifact_path`` (followed only inside folders the user allows, see
``runtime.file_paths``) -- where the ``output_<tag>.tosa.vgf`` equal to the blob names its
``output_<tag>_<tosa_spec>.tosa``.

Where Arm's ML SDK for Vulkan is installed (``vgf_scenario``: the scenario-runner, the ML
emulation layer, Mesa's lavapipe), the ``.vgf`` itself runs there instead. The backend option
``simulation`` (or ``$EDGETORCH_VGF_SIMULATION``) chooses: ``auto`` (the scenario-runner when the
ML SDK is found, else the TOSA graph), ``scenario-runner``, ``tosa``, or ``compare`` (both;
outputs must be equal, the scenario-runner's are returned). ``VgfDelegate.mode`` says which ran.
Torch-free; tosa-tools from ``edgetorch[arm]``, the ML SDK from ``edgetorch[vgf]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import (
    BackendNotFoundError,
    ErrorCode,
    InvalidArgumentError,
    InvalidProgramError,
    KernelError,
)
from ....runtime.backends import backend
from ....runtime.file_paths import allowed_roots, resolve_stored_path
from ..vgf.compiled import COMPILED, blob_key
from .tosa_backend import write_outputs
from .tosa_sim import TosaGraphRunner
from .vgf_scenario import ScenarioGraph, find_ml_sdk

BACKEND_ID = "VgfBackend"
ENV_VAR = "EDGETORCH_VGF_INTERMEDIATES"
SIMULATION_ENV_VAR = "EDGETORCH_VGF_SIMULATION"
SIMULATIONS = ("auto", "scenario-runner", "tosa", "compare")
MAGIC = b"VGF1"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
_HOW = (f"export with intermediates (VgfCompileSpec(...).dump_intermediate_artifacts_to(DIR)) "
        f"and pass load_program(..., backend_options={{'{BACKEND_ID}': {{'intermediates': DIR}}}})")


@dataclass
class VgfDelegate:
    runner: TosaGraphRunner | None  # the TOSA simulation
    scenario: ScenarioGraph | None  # the ML SDK scenario-runner
    tosa_path: str | None
    where: str
    mode: str  # "scenario-runner", "tosa" or "compare"


def _dirs(specs: Mapping[str, bytes], options: Mapping[str, Any], program_dir: str | None):
    named = [str(d) for d in (options.get("intermediates"), os.environ.get(ENV_VAR)) if d]
    yield from named
    stored = specs.get("debug_artifact_path")
    if stored:
        extra = options.get("allowed_dirs") or ()
        extra = [str(extra)] if isinstance(extra, (str, os.PathLike)) else [str(d) for d in extra]
        roots = allowed_roots([*named, *extra, program_dir])
        yield resolve_stored_path(stored.decode("utf-8", "replace"), roots,
                                  f"{BACKEND_ID} debug_artifact_path",
                                  f"{_HOW}, or {{'allowed_dirs': [DIR]}} to allow the stored path")


def find_tosa(blob: bytes, specs: Mapping[str, bytes], options: Mapping[str, Any],
              program_dir: str | None = None) -> tuple[str, bytes]:
    """``(where, tosa)`` of this delegate (see the module docstring)."""
    key = blob_key(blob)
    tosa = (options.get("tosa_graphs") or {}).get(key) or COMPILED.get(key)
    if tosa:
        return "<in memory>", bytes(tosa)
    spec = specs.get("tosa_spec", b"").decode("utf-8", "replace")
    if not _SAFE_NAME.fullmatch(spec):  # it becomes part of a file name
        raise InvalidProgramError(f"{BACKEND_ID}: compile spec tosa_spec {spec[:80]!r} is not a "
                                  "TOSA specification name")
    looked = []
    for d in _dirs(specs, options, program_dir):
        folder = Path(d)
        if not folder.is_dir():
            looked.append(f"{d} (missing)")
            continue
        converted = sorted(folder.glob("output_*.tosa.vgf"))[:256]
        looked.append(f"{d} ({len(converted)} .vgf files)")
        for vgf in converted:
            if vgf.stat().st_size == len(blob) and vgf.read_bytes() == blob:
                tag = vgf.name[len("output_"):-len(".tosa.vgf")]
                source = folder / f"output_{tag + '_' if tag else ''}{spec}.tosa"
                if source.is_file():
                    return str(source), source.read_bytes()
    raise BackendNotFoundError(
        f"{BACKEND_ID}: this delegate runs on a PC from its TOSA graph, which is not in the "
        f".pte; no intermediates folder holds its .vgf and .tosa (looked in: "
        f"{', '.join(looked) or 'none'}); {_HOW}", code=ErrorCode.NotFound)


def simulation(options: Mapping[str, Any]) -> str:
    """The mode a delegate loaded with these backend options runs in (``auto`` resolved)."""
    mode = str(options.get("simulation") or os.environ.get(SIMULATION_ENV_VAR) or "auto").lower()
    if mode not in SIMULATIONS:
        raise InvalidArgumentError(
            f"{BACKEND_ID}: backend option simulation={mode!r} is not one of {SIMULATIONS}")
    if mode == "auto":
        return "scenario-runner" if find_ml_sdk()[0] is not None else "tosa"
    return mode


def _scenario(blob: bytes) -> ScenarioGraph:
    sdk, why = find_ml_sdk()
    if sdk is None:
        raise BackendNotFoundError(f"{BACKEND_ID}: the ML SDK scenario-runner cannot run: {why}; "
                                   "or use simulation='tosa'", code=ErrorCode.NotFound)
    return ScenarioGraph(sdk, blob, f"{BACKEND_ID} (scenario-runner)")


@backend(BACKEND_ID)
class VgfSimulator:
    """``VgfBackend`` for the NumPy runtime: the ``.vgf`` on Arm's ML SDK scenario-runner, or the
    delegate's TOSA graph in tosa-tools."""

    def is_available(self) -> bool:
        return True  # missing tosa-tools or ML SDK is reported at init, with how to install it

    def init(self, blob: memoryview, compile_specs: dict[str, bytes], context: Any) -> VgfDelegate:
        data = bytes(blob)
        if data[:4] != MAGIC:
            raise InvalidProgramError(f"{BACKEND_ID}: the delegate blob starts with "
                                      f"{data[:4]!r}, not {MAGIC!r}; it is not a VGF file")
        fmt = compile_specs.get("output_format", b"vgf")
        if bytes(fmt) != b"vgf":
            raise InvalidProgramError(f"{BACKEND_ID}: output_format is {bytes(fmt)!r}, "
                                      "expected b'vgf'")
        options = getattr(context, "options", {}) or {}
        mode = simulation(options)
        scenario = _scenario(data) if mode != "tosa" else None
        runner = where = None
        if mode != "scenario-runner":
            where, tosa = find_tosa(data, compile_specs, options,
                                    getattr(context, "program_dir", None))
            runner = TosaGraphRunner(tosa, where=f"{BACKEND_ID} ({where})")
        return VgfDelegate(runner, scenario, where, f"{BACKEND_ID} delegate ({mode})", mode)

    def execute(self, handle: VgfDelegate, values: list[Any], args: list[int],
                context: Any = None) -> None:
        if handle.scenario is not None:
            n_in = len(handle.scenario.inputs)
            results = handle.scenario.run([np.asarray(values[i]) for i in args[:n_in]])
        if handle.runner is not None:
            n_in = len(handle.runner.input_specs)
            simulated = [np.asarray(r) for r in
                         handle.runner.run([np.asarray(values[i]) for i in args[:n_in]],
                                           getattr(context, "event_tracer", None))]
            if handle.scenario is None:
                results = simulated
            else:
                _compare(results, simulated, handle)
        write_outputs(results, values, args[n_in:], context, handle.where)

    def destroy(self, handle: VgfDelegate) -> None:
        return None


def _compare(device: list[np.ndarray], simulated: list[np.ndarray], handle: VgfDelegate) -> None:
    diffs = [float(np.abs(a.reshape(-1).astype(np.float64) - b.reshape(-1).astype(np.float64))
                   .max(initial=0)) if a.size == b.size else float("inf")
             for a, b in zip(device, simulated, strict=True)]
    if any(diffs):
        raise KernelError(f"{BACKEND_ID}: the scenario-runner's outputs differ from the TOSA "
                          f"graph {handle.tosa_path} by up to {max(diffs)} (per output {diffs}); "
                          "please report it with the .pte, or run with simulation='tosa'")
