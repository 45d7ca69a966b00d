"""``ViewCopyToSqueezeUnsqueezePass``: a ``view_copy`` that only drops size-1 dims becomes
``squeeze_copy.dims``; one that only adds a size-1 dim becomes ``unsqueeze_copy``
(ExecuTorch's pass of this name)."""

from __future__ import annotations

import torch

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult


class ViewCopyToSqueezeUnsqueezePass(ExportPass):
    def __init__(self) -> None:
        super().__init__()
        self.view_copy_op = exir_ops.edge.aten.view_copy.default
        self.squeeze_op = exir_ops.edge.aten.squeeze_copy.dims
        self.unsqueeze_op = exir_ops.edge.aten.unsqueeze_copy.default

    def is_node_target(self, node: torch.fx.Node, target: object) -> bool:
        return node.op == "call_function" and node.target == target

    def find_squeeze_dims(self, input_shape: list, view_shape: list) -> list[int] | None:
        """The dims of ``input_shape`` (all of size 1) whose removal gives ``view_shape``."""
        if len(input_shape) <= len(view_shape):
            return None
        i = j = 0
        dropped = []
        while i < len(input_shape) and j < len(view_shape):
            if input_shape[i] == view_shape[j]:
                i, j = i + 1, j + 1
            elif input_shape[i] == 1:
                dropped.append(i)
                i += 1
            else:
                return None
        if i < len(input_shape) or j < len(view_shape):
            return None
        return dropped

    def find_unsqueeze_dim(self, input_shape: list, view_shape: list) -> int | None:
        """Where ``view_shape`` adds one size-1 dim to ``input_shape`` (-1 when it is the
        last), or None."""
        if len(view_shape) - len(input_shape) != 1:
            return None
        i = j = 0
        idx = -1
        while j < len(view_shape):
            if i == j and j == len(input_shape):
                if view_shape[j] != 1:
                    return None
            elif input_shape[i] != view_shape[j]:
                if view_shape[j] != 1:
                    return None
                idx = j
                i -= 1
            i, j = i + 1, j + 1
        return idx

    def replace_view_copy_node(self, graph_module: torch.fx.GraphModule, view: torch.fx.Node,
                               op: object, arg: object) -> None:
        with graph_module.graph.inserting_before(view):
            new = graph_module.graph.create_node("call_function", op, (view.args[0], arg))
            new.meta = view.meta
            view.replace_all_uses_with(new)
            graph_module.graph.erase_node(view)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            if not self.is_node_target(node, self.view_copy_op):
                continue
            input_shape = node.args[0].meta["val"].shape
            dims = self.find_squeeze_dims(input_shape, node.args[1])
            if dims:
                self.replace_view_copy_node(graph_module, node, self.squeeze_op, dims)
                modified = True
                continue
            dim = self.find_unsqueeze_dim(input_shape, node.args[1])
            if dim:  # as in ExecuTorch, an unsqueeze at dim 0 stays a view_copy
                self.replace_view_copy_node(graph_module, node, self.unsqueeze_op, dim)
                modified = True
        if modified:
            graph_module.recompile()
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)
