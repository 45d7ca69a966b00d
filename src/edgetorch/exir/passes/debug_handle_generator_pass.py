"""Debug handles as ExecuTorch's passes (``exir.passes.debug_handle_generator_pass``); the
numbering itself is ``exir/debug_handles.py``'s, which ``to_edge`` runs."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassResult

from ..debug_handles import DEBUG_HANDLE_KEY, UNSET_DEBUG_HANDLE, bfs_nodes, generate_debug_handles
from ..pass_base import ExportPass


class DebugHandleGeneratorPass(ExportPass):
    """Number every node but placeholders and outputs, in ``gm`` and its control-flow
    submodules: nodes sharing a greatest ancestor in the export flow share a handle."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        generate_debug_handles(graph_module)
        return PassResult(graph_module, True)


def generate_missing_debug_handles(ep: ExportedProgram) -> None:
    """Give every node of ``ep`` without a handle (a pass made it without provenance) a fresh
    one after the largest in use, in breadth-first order."""
    nodes = list(bfs_nodes(ep.graph_module))
    largest = max((n.meta.get(DEBUG_HANDLE_KEY) or 0 for n in nodes), default=0)
    for node in nodes:
        if node.meta.get(DEBUG_HANDLE_KEY) in (UNSET_DEBUG_HANDLE, None):
            largest += 1
            node.meta[DEBUG_HANDLE_KEY] = largest
