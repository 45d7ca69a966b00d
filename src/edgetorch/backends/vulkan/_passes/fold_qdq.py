"""``FoldQDQPass``: remove the quantize/dequantize pairs PT2E leaves once the quantized
patterns are fused (a dequantize's users read the quantize's input instead)."""

from __future__ import annotations

import torch

from ....exir.pass_base import ExportPass, PassResult
from ....exir.passes import dead_code_elimination_pass
from .. import utils


class FoldQDQPass(ExportPass):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if not utils.is_quant_node(node):
                continue
            source = node.args[0]
            assert isinstance(source, torch.fx.Node)
            for user in node.users:
                if utils.is_dequant_node(user):
                    user.replace_all_uses_with(source)
        graph_module.recompile()
        dead_code_elimination_pass(graph_module)
        return PassResult(super().call(graph_module).graph_module, True)  # re-trace to check
