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
    return ExportedProgram(
        root=gm, graph=gm.graph, graph_signature=_quiet_deepcopy(ep.graph_signature),
        state_dict=ep.state_dict, range_constraints=_quiet_deepcopy(ep.range_constraints),
        module_call_graph=_quiet_deepcopy(ep.module_call_graph), constants=ep.constants,
        verifiers=[ep.verifier])
