"""``view_copy`` -> ``memory.view``: a reshape that shares its base's bytes instead of copying
them (ExecuTorch's ``exir.passes.replace_view_copy_with_view_pass``; ``to_executorch``'s
``remove_view_copy`` step).

A ``view_copy`` becomes a view when no graph output reads it (the runtime may move an output's
data pointer), and -- edgetorch's runtime reshapes bytes as they lie -- its base is laid out
contiguously and is no placeholder the graph also returns. The view's ``TensorSpec`` aliases
its base's (``alias_of``): memory planning gives it no bytes of its own."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import guard_or_true
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from .. import memory
from ..tensor import dim_order_of
from .normalize_view_copy_base_pass import VIEW_COPY, is_view_copy, normalize_view_copy_bases
from .rewrite import erase, rewrite
from .spec_prop import root, spec_of


def _is_contiguous(val: object) -> bool:
    """Whether ``val``'s bytes are in row-major order: its dim order, size-1 dims left out,
    is increasing (a [1, 8, 1, 1] channels-last tensor is laid out as a contiguous one). A
    data-dependent size counts as not 1 (asking would guard on it)."""
    if not isinstance(val, torch.Tensor):
        return False
    order = [d for d in dim_order_of(val) if guard_or_true(val.shape[d] != 1)]
    return order == sorted(order)


def as_view(node: torch.fx.Node) -> bool:
    base = node.args[0]
    if any(u.op == "output" for u in node.users):
        return False
    if not (isinstance(base, torch.fx.Node) and _is_contiguous(base.meta.get("val"))):
        return False
    if base.op == "placeholder" and any(u.op == "output" for u in base.users):
        return False
    node.target = memory.view
    base_spec = base.meta.get("spec")
    if base_spec is not None and isinstance(node.meta.get("val"), torch.Tensor):
        node.meta["spec"] = spec_of(node.meta["val"], alias_of=root(base_spec))
    return True


def view_copy_to_view(ep: ExportedProgram) -> bool:
    """``to_executorch``'s step: normalize the bases, drop the ``view_copy`` nodes left
    unread (as ExecuTorch's dead-code elimination does: no value, no buffer), then turn the
    eligible ones into views."""
    normalized = normalize_view_copy_bases(ep.graph_module)
    dropped = rewrite(ep.graph_module, {VIEW_COPY: erase})  # erase keeps nodes with readers
    return rewrite(ep.graph_module, {VIEW_COPY: as_view}) or normalized or dropped


class ReplaceViewCopyWithViewPass(PassBase):
    """Replace eligible ``view_copy`` nodes (see the module) with ``memory.view``; run after
    ``NormalizeViewCopyBasePass``."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module, rewrite(graph_module, {VIEW_COPY: as_view}))

    def requires(self, graph_module: torch.fx.GraphModule) -> None:
        for mod in graph_module.modules():
            if isinstance(mod, torch.fx.GraphModule):
                for node in mod.graph.nodes:
                    if is_view_copy(node) and is_view_copy(node.args[0]):
                        raise AssertionError(
                            f"{node.name} reads view_copy {node.args[0].name}: run "
                            "NormalizeViewCopyBasePass first")
