"""Copies of ExportedPrograms for partitioning and preprocessing."""

from __future__ import annotations

import copy
import warnings
from typing import Any

from torch.export import ExportedProgram


def _quiet_deepcopy(obj: Any) -> Any:
    with warnings.catch_warnings():  # torch warns about its own pytree internals here
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        return copy.deepcopy(obj)


def copy_program(ep: ExportedProgram) -> ExportedProgram:
    """A full copy, weights included."""
    return _quiet_deepcopy(ep)


def copy_graph(ep: ExportedProgram) -> ExportedProgram:
    """A copy whose graph and signature can change; the weights are shared, not copied."""
    gm = _quiet_deepcopy(ep.graph_module)
    signature = _quiet_deepcopy(ep.graph_signature)
    # Copying renames nodes whose names shadow Python builtins (nn layers' ``input`` becomes
    # ``input_1``); the signature must follow, as ExportedProgram's own deepcopy does.
    renamed = {a.name: b.name for a, b in zip(ep.graph.nodes, gm.graph.nodes) if a.name != b.name}
    for spec in [*signature.input_specs, *signature.output_specs]:
        if getattr(spec.arg, "name", None) in renamed:
            spec.arg.name = renamed[spec.arg.name]
    return ExportedProgram(
        root=gm, graph=gm.graph, graph_signature=signature,
        state_dict=ep.state_dict, range_constraints=_quiet_deepcopy(ep.range_constraints),
        module_call_graph=_quiet_deepcopy(ep.module_call_graph), constants=ep.constants,
        verifiers=[ep.verifier])
