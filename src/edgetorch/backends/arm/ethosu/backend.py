"""``EthosUBackend`` (ahead of time): lower a partition to TOSA (the TOSA backend), compile
it with Vela and return the blob ExecuTorch writes; external blocks become named data.

Vela's estimates and the TOSA graph of each compiled partition are kept in ``compiled.COMPILED``
(keyed by the blob's sha256) for ``vela_estimates`` and the runtime's simulation.
"""

from __future__ import annotations

import logging
from typing import Any, final

from torch.export import ExportedProgram

from ....exir._serialize._named_data_store import NamedDataStore
from ....exir.backend.backend_details import BackendDetails, PreprocessResult
from ....schema.program import CompileSpec
from ....util import progress
from .compile_spec import EthosUCompileSpec
from .compiled import COMPILED, CompiledPartition, blob_key
from .vela import VelaResult, vela_compile

logger = logging.getLogger(__name__)


def delegation_tag(edge_program: ExportedProgram) -> str:
    for node in edge_program.graph_module.graph.nodes:
        tag = node.meta.get("delegation_tag")
        if tag:
            return str(tag)
    return ""


def compile_tosa(tosa: bytes, compile_spec: EthosUCompileSpec) -> VelaResult:
    """Vela on a TOSA flatbuffer, with the spec's flags, in its intermediates folder."""
    verbose = logging.getLogger("edgetorch.backends.arm").getEffectiveLevel() <= logging.DEBUG
    with progress.steps("Vela", [f"compiling for {compile_spec.target}"]) as step:
        step.next()
        return vela_compile(tosa, list(compile_spec.compiler_flags),
                            compile_spec._get_intermediate_path(),
                            compile_spec.external_block_placements.to_block_placements(),
                            verbose=verbose)


def tosa_graphs(manager: Any) -> dict[str, bytes]:
    """``{sha256(blob): TOSA}`` of the Ethos-U delegates compiled in this process that appear in
    ``manager`` -- the runtime's ``backend_options["EthosUBackend"]["tosa_graphs"]``, to
    simulate them without an intermediates folder."""
    from ....exir.backend.lowered_backend_module import LoweredBackendModule

    out = {}
    for method in manager.methods:
        gm = manager.exported_program(method).graph_module
        for module in gm.modules():
            if isinstance(module, LoweredBackendModule) and module.backend_id == "EthosUBackend":
                part = COMPILED.get(blob_key(module.processed_bytes))
                if part is not None and part.tosa:
                    out[blob_key(module.processed_bytes)] = part.tosa
    return out


@final
class EthosUBackend(BackendDetails):
    """Ethos-U: TOSA lowering (``TOSABackend``), then Vela."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        from ..tosa.backend import TOSABackend, tosa_flatbuffer

        compile_spec = EthosUCompileSpec._from_list(compile_specs)
        assert isinstance(compile_spec, EthosUCompileSpec)
        tag = delegation_tag(edge_program)
        tosa = tosa_flatbuffer(edge_program, TOSABackend.filter_tosa_compile_specs(compile_spec))
        result = compile_tosa(tosa, compile_spec)
        inter = compile_spec._get_intermediate_path()
        tosa_path = (f"{inter.rstrip('/')}/output{'_' + tag if tag else ''}_"
                     f"{compile_spec.tosa_spec}.tosa") if inter else None
        COMPILED[blob_key(result.processed_bytes)] = CompiledPartition(
            tag, str(compile_spec.target), result, tosa, tosa_path)
        logger.info("EthosUBackend: partition %s -> %d bytes, %s cycles", tag or "?",
                    len(result.processed_bytes), result.summary.get("cycles_total"))
        if not result.external_blocks:
            return PreprocessResult(processed_bytes=result.processed_bytes)
        store = NamedDataStore()
        for block in result.external_blocks:
            store.add_named_data(block.key, block.payload, alignment=block.alignment,
                                 external_tag=block.placement)
        return PreprocessResult(processed_bytes=result.processed_bytes,
                                data_store_output=store.get_named_data_store_output())
