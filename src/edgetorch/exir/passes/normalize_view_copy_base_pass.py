"""A ``view_copy`` of a ``view_copy`` reads the first base that is no view (ExecuTorch's
``exir.passes.normalize_view_copy_base_pass``): a reshape of a reshape is one reshape of the
original, so after this pass no ``view_copy`` reads another, and the ones left without
readers are dead code. ``to_executorch`` runs it before turning ``view_copy`` into views."""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from .rewrite import rewrite

VIEW_COPY = torch.ops.aten.view_copy.default  # its Edge form compares equal


def is_view_copy(node: object) -> bool:
    return (isinstance(node, torch.fx.Node) and node.op == "call_function"
            and node.target == VIEW_COPY)


def from_first_non_view(node: torch.fx.Node) -> bool:
    """Point ``node`` at its base's base when its base is a ``view_copy`` (graph order: that
    base was normalized already, so one step suffices)."""
    base = node.args[0]
    if not is_view_copy(base):
        return False
    node.args = (base.args[0], *node.args[1:])
    return True


def normalize_view_copy_bases(gm: torch.fx.GraphModule) -> bool:
    return rewrite(gm, {VIEW_COPY: from_first_non_view})


class NormalizeViewCopyBasePass(PassBase):
    """Point each ``view_copy`` at the first non-view upstream (in every nested graph)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module, normalize_view_copy_bases(graph_module))

    def ensures(self, graph_module: torch.fx.GraphModule) -> None:
        for mod in graph_module.modules():
            if isinstance(mod, torch.fx.GraphModule):
                for node in mod.graph.nodes:
                    if is_view_copy(node) and is_view_copy(node.args[0]):
                        raise AssertionError(f"{node.name} still reads view_copy "
                                             f"{node.args[0].name}")
