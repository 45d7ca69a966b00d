"""``vela_estimates``: Vela's performance estimates of every Ethos-U delegate, as data.

ExecuTorch only prints them (and keeps the CSV of the last partition). Here each delegate
gets a dict: Vela's summary CSV row under Vela's own column names (``cycles_total``,
``cycles_npu``, ``cycles_sram_access``, ``inference_time`` [s], ``inferences_per_second``,
``sram_memory_used`` / ``off_chip_flash_memory_used`` [KiB], ``nn_macs``, ...), plus
``npu_operators`` / ``cpu_operators`` (from Vela's report), ``method``, ``delegate`` (index in
the method), ``tag``, ``target``, ``blob_bytes`` and, with ``per_layer=True``, ``per_layer``
(Vela's per-layer CSV rows). Numbers come from the Vela run of ``preprocess`` in this process;
for a delegate compiled elsewhere (a ``.pte`` file, ExecuTorch's included) Vela is re-run on
its TOSA graph found in the intermediates folder, as the runtime simulation finds it.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ....errors import InvalidArgumentError
from ....schema.program import CompileSpec
from ..runtime.ethosu import find_tosa, target_flags
from .backend import compile_tosa
from .compile_spec import EthosUCompileSpec
from .compiled import COMPILED, CompiledPartition, blob_key
from .vela import VelaResult
from .vela_bin import parse_vela_bin

BACKEND_ID = "EthosUBackend"
_OPS = re.compile(r"^(CPU|NPU) operators = (\d+)", re.M)


def _as_dict(result: VelaResult, per_layer: bool) -> dict[str, Any]:
    out = dict(result.summary)
    counts = {kind.lower(): int(n) for kind, n in _OPS.findall(result.stdout)}
    out["npu_operators"] = counts.get("npu", 0)
    out["cpu_operators"] = counts.get("cpu", 0)
    if per_layer:
        out["per_layer"] = [dict(r) for r in result.per_layer]
    return out


def _recompile(blob: bytes, specs: dict[str, bytes], options: dict[str, Any],
               named_data: Any = None, program_dir: str | None = None) -> CompiledPartition:
    vela = parse_vela_bin(blob, named_data)
    path, runner, _, _ = find_tosa(vela, specs, options, blob, program_dir)
    tosa = runner.tosa_bytes
    # Without debug_artifact_path: Vela's working files go to a temporary folder. Only the
    # target's options among the stored flags reach Vela (a .pte may come from anywhere).
    safe = {k: v for k, v in specs.items() if k != "debug_artifact_path"}
    safe["compile_flags"] = " ".join(target_flags(specs.get("compile_flags", b""))).encode()
    cs = EthosUCompileSpec._from_list([CompileSpec(k, v) for k, v in safe.items()])
    assert isinstance(cs, EthosUCompileSpec)
    tag = os.path.basename(path)[len("output_"):].split("_TOSA-")[0]
    return CompiledPartition(tag, str(cs.target), compile_tosa(tosa, cs), tosa, path)


def _from_managers(manager: Any) -> list[tuple[str, int, bytes, dict[str, bytes], Any]]:
    from ....exir.backend.lowered_backend_module import LoweredBackendModule
    from ....exir.backend.utils import is_delegate_call

    rows = []
    for method in sorted(manager.methods):
        ep = manager.exported_program(method)
        index = 0
        for node in ep.graph.nodes:  # delegate calls in graph order = the .pte's order
            if not is_delegate_call(node):
                continue
            lowered = getattr(ep.graph_module, str(node.args[0].target))
            if not isinstance(lowered, LoweredBackendModule):
                continue
            if lowered.backend_id == BACKEND_ID:
                specs = {cs.key: bytes(cs.value) for cs in lowered.compile_specs}
                rows.append((method, index, lowered.processed_bytes, specs,
                             lowered.named_data_store_output))
            index += 1
    return rows


def _from_pte(data: Any) -> list[tuple[str, int, bytes, dict[str, bytes], Any]]:
    from ....schema.pte import PteFile

    raw = open(data, "rb").read() if isinstance(data, (str, os.PathLike)) else bytes(data)
    pte = PteFile.parse(raw)
    rows = []
    for plan in pte.program.execution_plan:
        for index, delegate in enumerate(plan.delegates):
            if delegate.id == BACKEND_ID:
                rows.append((plan.name, index, bytes(pte.delegate_bytes(delegate)),
                             {cs.key: bytes(cs.value) for cs in delegate.compile_specs},
                             pte.named_data))
    return rows


def _named_data_getter(store: Any):
    if store is None or callable(store):
        return store

    def get(key: str) -> bytes:
        for table in [store.pte_data, *store.external_data.values()]:
            if key in table:
                return store.buffers[table[key].buffer_index]
        raise KeyError(key)
    return get


def vela_estimates(edge_or_et_manager: Any, per_layer: bool = False,
                   intermediates: str | None = None) -> list[dict[str, Any]]:
    """One dict per Ethos-U delegate (all methods, graph order); see the module docstring.

    Accepts an ``EdgeProgramManager`` (after ``to_edge_transform_and_lower``), an
    ``ExecutorchProgramManager``, or a ``.pte`` path/bytes. ``intermediates`` names the folder
    holding the delegates' ``.tosa`` files when they must be re-compiled (default: each
    delegate's ``debug_artifact_path``)."""
    if isinstance(edge_or_et_manager, (str, os.PathLike, bytes, bytearray, memoryview)):
        rows = _from_pte(edge_or_et_manager)
    elif hasattr(edge_or_et_manager, "exported_program"):
        rows = _from_managers(edge_or_et_manager)
    else:
        raise InvalidArgumentError(
            f"vela_estimates expects an EdgeProgramManager, an ExecutorchProgramManager or a "
            f".pte path, got {type(edge_or_et_manager).__name__}")
    options = {"intermediates": intermediates} if intermediates else {}
    program_dir = os.path.dirname(os.path.abspath(os.fspath(edge_or_et_manager))) \
        if isinstance(edge_or_et_manager, (str, os.PathLike)) else None
    out = []
    for method, index, blob, specs, store in rows:
        part = COMPILED.get(blob_key(blob))
        if part is None:
            part = _recompile(blob, specs, options, _named_data_getter(store), program_dir)
        est = {"method": method, "delegate": index, "tag": part.tag, "target": part.target,
               "blob_bytes": len(blob)}
        est.update(_as_dict(part.result, per_layer))
        out.append(est)
    return out


def format_estimates(estimates: list[dict[str, Any]]) -> str:
    """A short human-readable table of ``vela_estimates``' figures."""
    lines = []
    for e in estimates:
        lines.append(
            f"{e['method']}[delegate {e['delegate']}] {e.get('tag') or ''} on {e['target']} "
            f"({e.get('system_config')}, {e.get('memory_mode')}): "
            f"{e.get('cycles_total', 0):,.0f} cycles (NPU {e.get('cycles_npu', 0):,.0f}, SRAM "
            f"access {e.get('cycles_sram_access', 0):,.0f}), "
            f"{e.get('inference_time', 0) * 1e3:.3f} ms = "
            f"{e.get('inferences_per_second', 0):,.1f} inferences/s @ "
            f"{e.get('core_clock', 0) / 1e6:.0f} MHz; SRAM {e.get('sram_memory_used', 0):.2f} KiB, "
            f"off-chip flash {e.get('off_chip_flash_memory_used', 0):.2f} KiB; "
            f"{e.get('nn_macs', 0):,} MACs; NPU ops {e['npu_operators']}, "
            f"CPU ops {e['cpu_operators']}")
    return "\n".join(lines)
