"""``RemoveGetItemPass``: ``max_pool2d_with_indices`` whose indices nobody reads becomes
``max_pool2d`` (so the pooled values carry the qparams, not a tuple and its getitem)."""

from __future__ import annotations

import operator

from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass

aten = exir_ops.edge.aten


class RemoveGetItemPass(ExportPass):
    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target != aten.max_pool2d_with_indices.default:
                continue
            users = list(node.users)
            if not all(u.target is operator.getitem and u.args[1] == 0 for u in users):
                continue
            with graph.inserting_before(node):
                pool = graph.call_function(aten.max_pool2d.default, node.args, node.kwargs)
            pool.meta = dict(node.meta)
            for u in users:
                u.replace_all_uses_with(pool)
                graph.erase_node(u)
            graph.erase_node(node)
            modified = True
        if modified:
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)
