"""``DecomposeHardswishPass``: ``hardswish(x) = x * (clamp(x, -3, 3) + 3) / 6`` on the
integers of the linear/convolution before it.

``ClampHardswishPass`` already bounded x below by -3 at calibration, so only the upper clamp
remains (``minimum`` with 3 quantized); the ``+ 3`` moves into the second operand's zero point
and the ``/ 6`` into the output scale, so the whole activation is one quantized ``mul``.
"""

from __future__ import annotations

import logging

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.pass_base import PassResult

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass
from .lowering import quantize_value

logger = logging.getLogger(__name__)
aten = exir_ops.edge.aten


class DecomposeHardswishPass(ExportPass):
    TARGETS = {aten.hardswish.default}
    FUSE_OPS = {aten.linear.default, aten.convolution.default}

    def _decompose(self, graph, node: Node) -> bool:
        source = node.args[0]
        if source.op != "call_function" or source.target not in self.FUSE_OPS:
            logger.warning("Cannot fuse activation %s as input node %s is not a supported "
                           "fused activation op.", node.name, source.name)
            return False
        if len(source.users) > 1:
            logger.warning("Cannot fuse activation %s as input node %s has multiple users.",
                           node.name, source.name)
            return False
        qs = source.meta.get("output_qparams", [None])[0]
        three = quantize_value(3, qs.scale, qs.zp, qs.qmin, qs.qmax)
        with graph.inserting_after(source):
            upper = graph.create_node("call_function", aten.minimum.default,
                                      (source, torch.tensor(three, dtype=torch.int8)), {})
        upper.meta = source.meta.copy()
        with graph.inserting_after(upper):
            mul = graph.create_node("call_function", aten.mul.Tensor, (source, upper), {})
        mul.meta = node.meta.copy()
        qin = node.meta["input_qparams"][0]
        shifted = qin._replace(zp=qin.zp - round(3 / qin.scale))
        qout = node.meta["output_qparams"][0]
        # mul's meta dicts are the hardswish node's (a shallow copy), as in ExecuTorch
        node.meta["input_qparams"][0] = qin
        mul.meta["input_qparams"][1] = shifted
        mul.meta["output_qparams"][0] = qout._replace(scale=qout.scale * 6)
        node.replace_all_uses_with(mul)
        graph.erase_node(node)
        return True

    def call(self, graph_module: GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            if node.op == "call_function" and node.target in self.TARGETS:
                modified |= self._decompose(graph_module.graph, node)
        if modified:
            graph_module.graph.eliminate_dead_code()
            graph_module.recompile()
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)
