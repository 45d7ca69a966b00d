"""``FuseViewCopyTransform``: of a chain of ``view_copy``s through single-user unary
elementwise ops, keep the first view (giving it the last view's shape) and drop the others
(ExecuTorch's ``fuse_view_copy.py``)."""

from __future__ import annotations

import torch

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult

_A = exir_ops.edge.aten
_UNARY = ["aten.alias_copy.default", "aten.clone.default",
          "dim_order_ops._clone_dim_order.default", "aten._to_copy.default",
          "dim_order_ops._to_dim_order_copy.default",
          "quantized_decomposed.quantize_per_tensor.default",
          "quantized_decomposed.dequantize_per_tensor.default", "aten.abs.default",
          "aten.clamp.default", "aten.ceil.default", "aten.floor.default", "aten.neg.default",
          "aten.relu.default", "aten.round.default", "aten.sigmoid.default", "aten.silu.default",
          "aten.sqrt.default", "aten.tanh.default", "aten.sign.default",
          "aten.reciprocal.default", "aten.gelu.default", "aten.rsqrt.default",
          "aten.exp.default", "aten.log.default"]


def _edge_name(target: object) -> str | None:
    from ...exir.dialects.edge._ops import EdgeOpOverload

    return target.__name__ if isinstance(target, EdgeOpOverload) else None


class FuseViewCopyTransform(ExportPass):
    """``view(s0) -> view(s1) -> abs -> view(s2) -> sqrt -> view(s3)`` becomes
    ``view(s3) -> abs -> sqrt``: only the first view stays, with the final shape."""

    VIEW_OP = _A.view_copy.default
    UNARY_ELEMENTWISE_OPS = _UNARY

    def _find_view_copy_chain(self, start: torch.fx.Node, names: set[str]) -> list:
        """The later views of the single-user chain of ``names`` ops after ``start``."""
        views, node = [], start
        while node.op == "call_function" and _edge_name(node.target) in names \
                and len(node.users) == 1:
            user = next(iter(node.users))
            if _edge_name(user.target) not in names:
                break
            if user.target == self.VIEW_OP:
                views.append(user)
            node = user
        return views

    def _merge_view_copy_chains(self, graph: torch.fx.Graph) -> tuple[torch.fx.Graph, bool]:
        names = set(self.UNARY_ELEMENTWISE_OPS) | {"aten.view_copy.default"}
        modified = False
        for node in graph.find_nodes(op="call_function", target=self.VIEW_OP):
            later = self._find_view_copy_chain(node, names)
            if not later:
                continue
            modified = True
            node.args = (node.args[0], later[-1].args[1])
            for view in later:
                view.replace_all_uses_with(view.args[0])
        if modified:
            graph.eliminate_dead_code()
        return graph, modified

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph_module.graph, modified = self._merge_view_copy_chains(graph_module.graph)
        if modified:
            graph_module.recompile()
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)
