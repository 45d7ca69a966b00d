"""``TOSABackend``: lower a delegated edge subgraph to a TOSA flatbuffer (the blob is the
``.tosa`` file itself, as in ExecuTorch), written to the intermediates folder as
``output_<tag>_<tosa_spec>.tosa`` when ``dump_intermediate_artifacts_to`` was set."""

from __future__ import annotations

import logging
import os

from torch.export import ExportedProgram

from ....exir.backend import BackendDetails, PreprocessResult
from ....exir.backend.compile_spec_schema import CompileSpec
from ....exir.backend.partitioner import TAG
from ..common.arm_compile_spec import ArmCompileSpec
from .compile_spec import TosaCompileSpec
from .lowering import TABLE_FUNCTIONS, lower_to_tosa
from .operator_support import DQ_OPS, Q_OPS

logger = logging.getLogger(__name__)


def first_delegation_tag(ep: ExportedProgram) -> str:
    """The tag ExecuTorch names the file after: it reads it after its passes, when the folded
    quantize/dequantize nodes are gone and each quantized table operator has been replaced by
    a TABLE node that does not inherit the tag (InsertTableOpsPass) -- a partition of table
    operators alone is dumped untagged."""
    for node in ep.graph_module.graph.nodes:
        tag = node.meta.get(TAG)
        if not tag or node.op != "call_function" or node.target in Q_OPS | DQ_OPS:
            continue
        src = node.args[0] if node.args else None
        if node.target in TABLE_FUNCTIONS and getattr(src, "target", None) in DQ_OPS:
            continue
        return tag
    return ""


def tosa_flatbuffer(edge_program: ExportedProgram, compile_spec: ArmCompileSpec) -> bytes:
    """Lower and serialise; dump ``output_<tag>_<spec>.tosa`` into the intermediates folder."""
    binary = lower_to_tosa(edge_program, compile_spec.tosa_spec)
    path = compile_spec._get_intermediate_path()
    if path:
        os.makedirs(path, exist_ok=True)
        tag = first_delegation_tag(edge_program)
        name = f"output{'_' + tag if tag else ''}_{compile_spec.tosa_spec}.tosa"
        with open(os.path.join(path, name), "wb") as f:
            f.write(binary)
    return binary


class TOSABackend(BackendDetails):
    """Backend id ``TOSABackend``; compile specs are ``TosaCompileSpec._to_list()``."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        spec = TosaCompileSpec._from_list(compile_specs)
        return PreprocessResult(processed_bytes=tosa_flatbuffer(edge_program, spec))

    @staticmethod
    def filter_tosa_compile_specs(compile_spec: ArmCompileSpec) -> TosaCompileSpec:
        """The TOSA part of an Ethos-U (or other Arm) compile spec, as ExecuTorch derives it."""
        tosa = TosaCompileSpec(compile_spec.tosa_spec)
        tosa.set_pass_pipeline_config(compile_spec._get_pass_pipeline_config())
        tosa.dump_intermediate_artifacts_to(compile_spec._get_intermediate_path())
        tosa.dump_debug_info(compile_spec.tosa_debug_mode)
        tosa._set_tosa_dev_mode(compile_spec.tosa_dev_mode)
        return tosa
