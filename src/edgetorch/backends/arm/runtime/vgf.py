"""The runtime ``VgfBackend``: VGF delegates run on a PC from the TOSA graph they were converted
from, with tosa-tools' reference model (the ``.vgf`` holds SPIR-V for a Vulkan ML device).

The TOSA graph is found, in order: in ``backend_options={"VgfBackend": {"tosa_graphs":
{sha256(blob): tosa}}}``; made by this very process (``vgf.compiled``); in an intermediates
folder -- the ``intermediates`` option, ``$EDGETORCH_VGF_INTERMEDIATES``, else the delegate's
stored ``debug_artifact_path`` (followed only inside folders the user allows, see
``runtime.file_paths``) -- where the ``output_<tag>.tosa.vgf`` equal to the blob names its
``output_<tag>_<tosa_spec>.tosa``. The backend option ``simulation`` (or
``$EDGETORCH_VGF_SIMULATION``) is ``auto`` or ``tosa``; running the VGF itself on Arm's ML SDK
scenario-runner is not implemented yet. Torch-free; tosa-tools from ``edgetorch[arm]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import BackendNotFoundError, ErrorCode, InvalidArgumentError, InvalidProgramError
from ....runtime.backends import backend
from ....runtime.file_paths import allowed_roots, resolve_stored_path
from ..vgf.compiled import COMPILED, blob_key
from .tosa_backend import write_outputs
from .tosa_sim import TosaGraphRunner

BACKEND_ID = "VgfBackend"
ENV_VAR = "EDGETORCH_VGF_INTERMEDIATES"
SIMULATION_ENV_VAR = "EDGETORCH_VGF_SIMULATION"
SIMULATIONS = ("auto", "tosa")
MAGIC = b"VGF1"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
_HOW = (f"export with intermediates (VgfCompileSpec(...).dump_intermediate_artifacts_to(DIR)) "
        f"and pass load_program(..., backend_options={{'{BACKEND_ID}': {{'intermediates': DIR}}}})")


@dataclass
class VgfDelegate:
    runner: TosaGraphRunner
    tosa_path: str
    where: str


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


def _simulation(options: Mapping[str, Any]) -> str:
    mode = str(options.get("simulation") or os.environ.get(SIMULATION_ENV_VAR) or "auto").lower()
    if mode not in SIMULATIONS:
        raise InvalidArgumentError(
            f"{BACKEND_ID}: backend option simulation={mode!r} is not one of {SIMULATIONS} "
            "(the ML SDK scenario-runner path is not implemented yet)")
    return mode


@backend(BACKEND_ID)
class VgfSimulator:
    """``VgfBackend`` for the NumPy runtime: the delegate's TOSA graph in tosa-tools."""

    def is_available(self) -> bool:
        return True  # missing tosa-tools is reported at init, with how to install it

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
        _simulation(options)
        where, tosa = find_tosa(data, compile_specs, options,
                                getattr(context, "program_dir", None))
        return VgfDelegate(TosaGraphRunner(tosa, where=f"{BACKEND_ID} ({where})"), where,
                           f"{BACKEND_ID} delegate")

    def execute(self, handle: VgfDelegate, values: list[Any], args: list[int],
                context: Any = None) -> None:
        runner = handle.runner
        n_in = len(runner.input_specs)
        inputs = [np.asarray(values[i]) for i in args[:n_in]]
        write_outputs(runner.run(inputs), values, args[n_in:], context, handle.where)

    def destroy(self, handle: VgfDelegate) -> None:
        return None
