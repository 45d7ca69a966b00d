"""``RemoveRedundantOpsTransform``: drop copies that change neither dtype nor shape (clone,
alias, dim-order copies, no-op expand and copy): the delegate's tensors have no dim order
or aliasing to preserve."""

from __future__ import annotations

import torch

from ....exir.dialects._ops import ops as exir_ops
from ....exir.dialects.edge._ops import EdgeOpOverload
from ....exir.pass_base import ExportPass, PassResult
from ....exir.passes import dead_code_elimination_pass

# By Edge name; the plain torch callables and overloads ExecuTorch lists too.
_EDGE = {"aten.clone.default", "aten.alias.default", "aten.alias_copy.default",
         "aten.lift_fresh_copy.default", "dim_order_ops._to_dim_order_copy.default",
         "dim_order_ops._clone_dim_order.default", "aten.expand_copy.default",
         "aten.copy.default"}
_TORCH = {torch.clone, torch.ops.aten.clone.default, torch.ops.aten.alias.default,
          torch.ops.aten.alias_copy.default}


def _is_redundant_op(target: object) -> bool:
    if isinstance(target, EdgeOpOverload):
        return target.__name__ in _EDGE
    return target in _TORCH


class RemoveRedundantOpsTransform(ExportPass):
    def _should_remove(self, node: torch.fx.Node) -> bool:
        if not _is_redundant_op(node.target):
            return False
        src = node.args[self._src_index(node)]
        assert isinstance(src, torch.fx.Node)
        a, b = src.meta["val"], node.meta["val"]
        return a.dtype == b.dtype and a.shape == b.shape

    @staticmethod
    def _src_index(node: torch.fx.Node) -> int:
        # copy(self, src): the value that flows on is src
        return 1 if node.target == exir_ops.edge.aten.copy.default else 0

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if self._should_remove(node):
                node.replace_all_uses_with(node.args[self._src_index(node)])
        graph_module.graph.eliminate_dead_code()
        graph_module.recompile()
        dead_code_elimination_pass(graph_module)
        return PassResult(graph_module, True)
