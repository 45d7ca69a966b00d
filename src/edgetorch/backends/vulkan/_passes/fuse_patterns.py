"""``FusePatternsPass``: replace every fusable pattern (``patterns``) with its fused op."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from ....exir.pass_base import ExportPass, PassResult
from .. import patterns


class FusePatternsPass(ExportPass):
    def __init__(self) -> None:
        super().__init__()
        self._exported_program: ExportedProgram | None = None

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        assert self._exported_program is not None, "set _exported_program before running"
        replaced = patterns.replace_all_fusable_subgraphs(self._exported_program, graph_module)
        if replaced:
            graph_module.recompile()
            graph_module = super().call(graph_module).graph_module  # re-trace
        return PassResult(graph_module, replaced > 0)
