"""``RemoveAssertsTransform``: drop runtime assertions; shaders cannot abort."""

from __future__ import annotations

import torch

from ....exir.pass_base import ExportPass, PassResult


class RemoveAssertsTransform(ExportPass):
    assert_ops = {torch.ops.aten._assert_scalar.default,
                  torch.ops.aten.sym_constrain_range_for_size.default}

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if node.target in self.assert_ops:
                graph_module.graph.erase_node(node)
        graph_module.graph.eliminate_dead_code()
        graph_module.recompile()
        return PassResult(graph_module, True)
