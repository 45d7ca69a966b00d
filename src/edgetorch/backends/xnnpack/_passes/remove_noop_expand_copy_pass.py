"""``RemoveNoopExpandCopyPass``: bypass ``expand_copy`` nodes that change neither shape nor dtype
(shape specialisation leaves such copies in static graphs); as ExecuTorch's pass of that name."""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

_EXPAND_COPY = torch.ops.aten.expand_copy.default


def _is_expand_copy(target: object) -> bool:
    # Edge graphs hold the ATen overload, or an Edge-dialect wrapper that compares equal to it
    # or prints with its name.
    return target == _EXPAND_COPY or str(target).endswith("aten.expand_copy.default")


class RemoveNoopExpandCopyPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or not _is_expand_copy(node.target):
                continue
            src = node.args[0]
            if not isinstance(src, torch.fx.Node):
                continue
            before, after = src.meta.get("val"), node.meta.get("val")
            if before is None or after is None:
                continue
            if before.dtype == after.dtype and before.shape == after.shape:
                node.replace_all_uses_with(src)
                modified = True
        if modified:
            graph_module.graph.eliminate_dead_code()
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)
