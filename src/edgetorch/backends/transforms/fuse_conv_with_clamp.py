"""``FuseClampPass``: a convolution whose only user is a ReLU or hardtanh becomes
``et_vk.conv_with_clamp`` with the activation's bounds (ExecuTorch's pass of this name)."""

from __future__ import annotations

import sys

import torch

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult


class FuseClampPass(ExportPass):
    FUSEABLE_OPS = [exir_ops.edge.aten.convolution.default]
    FUSEABLE_ACTIVATIONS = [exir_ops.edge.aten.relu.default, exir_ops.edge.aten.hardtanh.default]

    def get_output_min_max_from_activation(self, activation: torch.fx.Node):
        if activation.target == exir_ops.edge.aten.relu.default:
            return 0.0, sys.float_info.max
        if len(activation.args) > 1:  # hardtanh
            return activation.args[1], activation.args[2]
        return -1.0, 1.0

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        from ..vulkan import custom_ops_lib  # noqa: F401  (defines et_vk.conv_with_clamp)

        graph = graph_module.graph
        for act in graph.nodes:
            if act.op != "call_function" or act.target not in self.FUSEABLE_ACTIVATIONS:
                continue
            conv = act.args[0]
            if not (conv.op == "call_function" and conv.target in self.FUSEABLE_OPS
                    and len(conv.users) == 1):
                continue
            lo, hi = self.get_output_min_max_from_activation(act)
            args = (*conv.args, lo, hi)
            act.replace_all_uses_with(conv)
            graph.erase_node(act)
            with graph.inserting_before(conv):
                fused = graph.create_node("call_function",
                                          exir_ops.edge.et_vk.conv_with_clamp.default, args)
                conv.replace_all_uses_with(fused)
                graph.erase_node(conv)
        graph_module.recompile()
        return PassResult(super().call(graph_module).graph_module, True)
