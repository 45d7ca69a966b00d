"""``InsertDtypePromotionPass``: a binary op whose two tensor inputs differ in dtype gets
``_to_copy`` casts to a common dtype first (the shaders take one dtype); any mix promotes to
float32, as in ExecuTorch."""

from __future__ import annotations

import torch

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass, PassResult
from ....exir.passes import dead_code_elimination_pass

_A = exir_ops.edge.aten
BINARY_OPS = {_A.add.Tensor, _A.sub.Tensor, _A.mul.Tensor, _A.div.Tensor, _A.div.Tensor_mode,
              _A.pow.Tensor_Tensor, _A.minimum.default, _A.eq.Tensor, _A.lt.Tensor,
              _A.le.Tensor, _A.gt.Tensor, _A.ge.Tensor}


def _promote_dtype(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    return a if a == b else torch.float32


class InsertDtypePromotionPass(ExportPass):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        dirty = False
        for node in graph.nodes:
            if node.op != "call_function" or node.target not in BINARY_OPS:
                continue
            lhs, rhs = node.args[0], node.args[1]
            if not isinstance(lhs, torch.fx.Node) or not isinstance(rhs, torch.fx.Node) \
                    or "val" not in lhs.meta or "val" not in rhs.meta:
                continue
            a, b = lhs.meta["val"].dtype, rhs.meta["val"].dtype
            if a == b:
                continue
            promoted = _promote_dtype(a, b)
            for arg, dtype in ((lhs, a), (rhs, b)):
                if dtype == promoted:
                    continue
                with graph.inserting_before(node):
                    cast = graph.create_node("call_function", _A._to_copy.default, (arg,),
                                             {"dtype": promoted})
                    cast.meta["val"] = arg.meta["val"].to(promoted)
                node.replace_input_with(arg, cast)
                dirty = True
        if dirty:
            graph.eliminate_dead_code()
            graph_module.recompile()
            dead_code_elimination_pass(graph_module)
        return PassResult(graph_module, dirty)
