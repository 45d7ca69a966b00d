"""The runtime ``EthosUBackend``: Ethos-U delegates run functionally on a PC (no NPU, no FVP).

Nothing on a PC executes Vela's register command stream, so a delegate runs its TOSA graph --
the graph Vela compiled -- with tosa-tools' reference model. The ``.pte`` holds only Vela's
output; the TOSA comes from the intermediates folder: the one given as
``load_program(..., backend_options={"EthosUBackend": {"intermediates": DIR}})`` or
``$EDGETORCH_ETHOSU_INTERMEDIATES``, else the delegate's ``debug_artifact_path`` compile spec
(so ExecuTorch's own ``.pte`` built with ``--intermediates`` runs too). Before any folder: a
graph given as ``{"tosa_graphs": {sha256(blob): tosa}}``, or compiled by this very process
(``ethosu.compiled``), so compile-then-run needs no intermediates. There the files are
``output_<tag>_<tosa_spec>.tosa``; the one whose inputs and outputs match the blob's I/O
description is this delegate's (ties, e.g. two partitions of the same shapes, are broken by
compiling each candidate with Vela and comparing the command stream).

Inputs cross the boundary as ExecuTorch's runtime copies them to the NPU: raw bytes, in the
order and element size of the blob's I/O table, no layout change (the TOSA graph transposes).
Optional extra: needs ``tosa-tools`` (``pip install 'edgetorch[arm]'``); NumPy only otherwise.

Without a TOSA graph the delegate runs its register command stream instead (``npu/``: a
functional Ethos-U55/U65 simulator), so any Ethos-U ``.pte`` runs. The backend option
``simulation`` (or ``$EDGETORCH_ETHOSU_SIMULATION``) chooses: ``auto`` (TOSA when found, else
the command stream), ``tosa``, ``npu`` (command stream only), or ``compare`` (both; outputs
must be equal, the TOSA result is returned).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import (
    BackendNotFoundError,
    EdgeTorchError,
    ErrorCode,
    InvalidArgumentError,
    InvalidProgramError,
    KernelError,
)
from ....runtime.backends import backend
from ....runtime.file_paths import allowed_roots, resolve_stored_path
from ..ethosu.compiled import COMPILED, blob_key
from ..ethosu.vela_bin import VelaBin, VelaIO, parse_vela_bin
from .tosa_sim import NUMPY_DTYPES, TosaGraphRunner

BACKEND_ID = "EthosUBackend"
ENV_VAR = "EDGETORCH_ETHOSU_INTERMEDIATES"
SIMULATION_ENV_VAR = "EDGETORCH_ETHOSU_SIMULATION"
SIMULATIONS = ("auto", "tosa", "npu", "compare")
_HOW_TO_GET_TOSA = (
    "export with intermediates (EthosUCompileSpec(...).dump_intermediate_artifacts_to(DIR), or "
    "aot_arm_compiler --intermediates DIR) and keep DIR, or pass "
    f"load_program(..., backend_options={{'{BACKEND_ID}': {{'intermediates': DIR}}}})")


@dataclass(frozen=True)
class TosaIO:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass
class EthosUDelegate:
    """An initialised delegate: the parsed blob, and what runs it -- the TOSA graph that
    stands in for it and/or the command-stream simulator (``npu``)."""

    vela: VelaBin
    runner: TosaGraphRunner | None
    tosa_path: str | None
    inputs: list[TosaIO] | None
    outputs: list[TosaIO] | None
    target: str
    simulation: str = "tosa"
    npu: Any = None  # npu.simulator.NpuProgram
    runs: int = 0
    last_compare: list[int] | None = None

    def report(self) -> str:
        """What ran the delegate (and, for the command stream, the NPU operations)."""
        if self.npu is None:
            return f"{BACKEND_ID} ({self.target}): TOSA graph {self.tosa_path}"
        ops = self.npu.last_stats if self.npu.last_stats is not None else "not run yet"
        how = "command stream" + (f" and TOSA graph {self.tosa_path}" if self.runner else "")
        return (f"{BACKEND_ID} ({self.target}): simulated from its {how} on "
                f"{self.npu.accelerator}; NPU operations per run: {ops}")

    def __str__(self) -> str:
        if self.inputs is None:
            return f"Ethos-U delegate for {self.target}, {self.report()}\n  {self.vela}"
        return (f"Ethos-U delegate for {self.target}, simulated from {self.tosa_path}: "
                f"inputs {[(t.shape, t.dtype.name) for t in self.inputs]}, "
                f"outputs {[(t.shape, t.dtype.name) for t in self.outputs or []]}\n  {self.vela}")


def tosa_graph_io(tosa: bytes, where: str = "TOSA graph") -> tuple[TosaGraphRunner,
                                                                   list[TosaIO], list[TosaIO]]:
    """The graph ready to run (arm's ``tosa_sim``), and its inputs and outputs."""
    runner = TosaGraphRunner(tosa, where)

    def io(specs) -> list[TosaIO]:
        return [TosaIO(name, tuple(int(d) for d in t.shape),
                       np.dtype(NUMPY_DTYPES.get(t.dtype, np.int8))) for name, t in specs]

    return runner, io(runner.input_specs), io(runner.output_specs)


def _matches(tosa_io: list[TosaIO], vela_io: list[VelaIO]) -> bool:
    return len(tosa_io) == len(vela_io) and all(
        int(np.prod(t.shape, dtype=np.int64)) == v.numel and t.dtype.itemsize == v.elem_size
        for t, v in zip(tosa_io, vela_io, strict=True))


def _user_dirs(options: Mapping[str, Any]) -> list[str]:
    """Folders the user named: the ``intermediates`` option, ``$EDGETORCH_ETHOSU_INTERMEDIATES``
    and ``allowed_dirs`` (folders a stored ``debug_artifact_path`` may point into)."""
    dirs = [str(d) for d in (options.get("intermediates"), os.environ.get(ENV_VAR)) if d]
    extra = options.get("allowed_dirs") or ()
    dirs += [str(extra)] if isinstance(extra, (str, os.PathLike)) else [str(d) for d in extra]
    return dirs


def _candidate_dirs(specs: Mapping[str, bytes], options: Mapping[str, Any],
                    program_dir: str | None = None) -> Iterator[str]:
    """The folders to look in, in order; the stored ``debug_artifact_path`` last, resolved
    only when reached (it is not needed when a folder the user named has the graph)."""
    yield from (str(d) for d in (options.get("intermediates"), os.environ.get(ENV_VAR)) if d)
    path = specs.get("debug_artifact_path")
    if path:  # a path from the file: followed only inside the allowed folders
        roots = allowed_roots([*_user_dirs(options), program_dir])
        yield resolve_stored_path(
            path.decode("utf-8", "replace"), roots, f"{BACKEND_ID} debug_artifact_path",
            f"pass load_program(..., backend_options={{'{BACKEND_ID}': {{'intermediates': DIR}}}}) "
            f"to read the TOSA graphs from DIR, {{'allowed_dirs': [DIR]}} to allow the stored "
            "path, or {'simulation': 'npu'} to run the command stream without TOSA graphs")


# The Vela options a delegate's stored flags may pass on when the runtime compiles a candidate
# TOSA graph to break a tie: the target's options, nothing that reads or writes a file.
_SAFE_FLAG_VALUE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
_TARGET_FLAGS = {"--accelerator-config", "--system-config", "--memory-mode", "--optimise",
                 "--arena-cache-size", "--output-format", "--cop-format"}
_BUILTIN_CONFIGS = {"Arm/vela.ini"}


def target_flags(stored: bytes) -> list[str]:
    """The target options among a delegate's stored Vela flags; every other flag (reports,
    output folders, config files other than Vela's own) is dropped, never handed to Vela."""
    flags = []
    for flag in stored.decode("utf-8", "replace").split(" ")[:64]:
        name, eq, value = flag.partition("=")
        if not eq:
            continue
        if name == "--config" and value in _BUILTIN_CONFIGS:
            flags.append(flag)
        elif name in _TARGET_FLAGS and _SAFE_FLAG_VALUE.fullmatch(value):
            flags.append(flag)
    return flags


def _same_command_stream(tosa: bytes, specs: Mapping[str, bytes], vela: VelaBin) -> bool:
    from ..ethosu.vela import vela_compile  # needs ethos-u-vela, only for ties

    flags = target_flags(specs.get("compile_flags", b""))
    return parse_vela_bin(vela_compile(tosa, flags).processed_bytes).cmd_data == vela.cmd_data


def find_tosa(vela: VelaBin, specs: Mapping[str, bytes], options: Mapping[str, Any],
              blob: bytes | None = None, program_dir: str | None = None
              ) -> tuple[str, TosaGraphRunner, list[TosaIO], list[TosaIO]]:
    """The TOSA file of this delegate (see the module docstring for where it is looked for)."""
    if blob is not None:
        key = blob_key(blob)
        compiled = COMPILED.get(key)
        tosa = (options.get("tosa_graphs") or {}).get(key) or (compiled.tosa if compiled else None)
        if tosa:
            return ("<in memory>", *tosa_graph_io(bytes(tosa), f"{BACKEND_ID} (in memory)"))
    spec = specs.get("tosa_spec", b"").decode("utf-8", "replace")
    if not _SAFE_FLAG_VALUE.fullmatch(spec):  # it becomes part of a file name pattern
        raise InvalidProgramError(f"{BACKEND_ID}: compile spec tosa_spec {spec[:80]!r} is not a "
                                  "TOSA specification name")
    if not (specs.get("debug_artifact_path") or options.get("intermediates")
            or os.environ.get(ENV_VAR)):
        raise BackendNotFoundError(
            f"{BACKEND_ID}: this delegate ({specs.get('target', b'?').decode()}) can run on a PC "
            "only from its TOSA graph, which is not in the .pte and no intermediates folder is "
            f"known (no debug_artifact_path compile spec); {_HOW_TO_GET_TOSA}",
            code=ErrorCode.NotFound)
    looked, matching = [], []
    for d in _candidate_dirs(specs, options, program_dir):
        folder = Path(d)
        files = sorted(folder.glob(f"output_*_{spec}.tosa")) if folder.is_dir() else []
        looked.append(f"{d} ({len(files)} .tosa files)" if folder.is_dir() else f"{d} (missing)")
        for f in files:
            runner, ins, outs = tosa_graph_io(f.read_bytes(), f"{BACKEND_ID} ({f})")
            if _matches(ins, vela.inputs) and _matches(outs, vela.outputs):
                matching.append((str(f), runner, ins, outs))
        if matching:
            break
    if len(matching) > 1:
        exact = [m for m in matching if _same_command_stream(m[1].tosa_bytes, specs, vela)]
        matching = exact or matching[:0]
    if len(matching) != 1:
        raise BackendNotFoundError(
            f"{BACKEND_ID}: no TOSA graph {spec!r} whose inputs/outputs match this delegate "
            f"({len(vela.inputs)} inputs, {len(vela.outputs)} outputs) in {', '.join(looked)}; "
            + _HOW_TO_GET_TOSA, code=ErrorCode.NotFound)
    return matching[0]


def _simulation(options: Mapping[str, Any]) -> str:
    mode = str(options.get("simulation") or os.environ.get(SIMULATION_ENV_VAR) or "auto").lower()
    if mode not in SIMULATIONS:
        raise InvalidArgumentError(
            f"{BACKEND_ID}: backend option simulation={mode!r} is not one of {SIMULATIONS}")
    return mode


def _npu_program(vela: VelaBin, target: str):
    from .npu.simulator import NpuProgram

    return NpuProgram.from_vela_bin(vela, target if target.startswith("ethos-u") else None)


@backend(BACKEND_ID)
class EthosUSimulator:
    """``EthosUBackend`` for the NumPy runtime: simulates the delegate from its TOSA graph or
    its command stream."""

    def is_available(self) -> bool:
        return True  # missing tosa-tools is reported at init, with how to install it

    def init(self, blob: memoryview, compile_specs: dict[str, bytes], context: Any) -> EthosUDelegate:
        vela = parse_vela_bin(blob, context.named_data)
        options = getattr(context, "options", {}) or {}
        target = compile_specs.get("target", b"?").decode("utf-8", "replace")
        mode = _simulation(options)
        if mode == "npu":
            return EthosUDelegate(vela, None, None, None, None, target, "npu",
                                  _npu_program(vela, target))
        try:
            path, runner, ins, outs = find_tosa(vela, compile_specs, options, blob,
                                                getattr(context, "program_dir", None))
        except BackendNotFoundError as missing:
            if mode != "auto":
                raise
            try:
                npu = _npu_program(vela, target)
            except EdgeTorchError as exc:  # e.g. an Ethos-U85 stream
                raise BackendNotFoundError(
                    f"{missing}; the command-stream simulator cannot run it either: {exc}",
                    code=ErrorCode.NotFound) from exc
            return EthosUDelegate(vela, None, None, None, None, target, "npu", npu)
        npu = _npu_program(vela, target) if mode == "compare" else None
        return EthosUDelegate(vela, runner, path, ins, outs, target, mode, npu)

    def execute(self, handle: EthosUDelegate, values: list[Any], args: list[int],
                context: Any = None) -> None:
        n_in, n_out = len(handle.vela.inputs), len(handle.vela.outputs)
        if len(args) != n_in + n_out:
            raise InvalidProgramError(
                f"{BACKEND_ID}: the delegate call passes {len(args)} values, the delegate has "
                f"{n_in} inputs and {n_out} outputs")
        raw = []
        for k, io in enumerate(handle.vela.inputs):
            arr = np.ascontiguousarray(values[args[k]])
            if arr.size != io.numel or arr.dtype.itemsize != io.elem_size:
                raise InvalidArgumentError(
                    f"{BACKEND_ID} input {k}: got {arr.dtype} {list(arr.shape)}, the NPU expects "
                    f"{io.numel} elements of {io.elem_size} byte(s) (Vela shape {list(io.shape)})")
            raw.append(arr)
        # raw bytes, as ExecuTorch's runtime memcpy's them into the NPU's scratch
        if handle.runner is not None:
            feeds = [a.view(t.dtype).reshape(t.shape) for a, t in zip(raw, handle.inputs or [],
                                                                        strict=True)]
            results = [np.asarray(r) for r in handle.runner.run(
                feeds, getattr(context, "event_tracer", None))]  # per-operator values, when asked
        if handle.npu is not None:
            sim = handle.npu.run(raw)
            if handle.runner is None:
                results = sim
            else:
                diffs = [int(np.abs(a.reshape(-1).astype(np.int64)
                                    - b.reshape(-1).astype(np.int64)).max(initial=0))
                         for a, b in zip(results, sim, strict=True)]
                handle.last_compare = diffs
                if any(diffs):
                    raise KernelError(
                        f"{BACKEND_ID} ({handle.target}): the command-stream simulation differs "
                        f"from the TOSA graph {handle.tosa_path} by up to {max(diffs)} steps "
                        f"(per output {diffs}); please report it with the .pte, or run with "
                        "simulation='tosa'")
        handle.runs += 1
        for k, res in enumerate(results):
            out = values[args[n_in + k]]
            if res.size != out.size or res.dtype.itemsize != out.dtype.itemsize:
                raise InvalidProgramError(
                    f"{BACKEND_ID} output {k}: the delegate gives {res.dtype} "
                    f"{list(res.shape)}, the method expects {out.dtype} {list(out.shape)}")
            np.copyto(out, res.reshape(out.shape).view(out.dtype))

    def destroy(self, handle: EthosUDelegate) -> None:
        handle.runner = None
        handle.npu = None
