"""Export's runtime-assertion nodes go: the runtime checks nothing they check
(ExecuTorch's ``exir.passes.remove_graph_asserts_pass``).

``to_edge`` drops them all (``remove_asserts``); ``RemoveGraphAssertsPass`` is the same rule
as a user pass, and ``RemoveNonCoreAtenOpGraphAssertsPass`` drops only the one assertion
that is not core ATen (``_assert_tensor_metadata``)."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from .rewrite import erase, rewrite

ASSERT_OPS = frozenset({
    torch.ops.aten._assert_async.msg,
    torch.ops.aten._assert_scalar.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten._assert_tensor_metadata.default,
})
NON_CORE_ASSERT_OPS = frozenset({torch.ops.aten._assert_tensor_metadata.default})


def erase_asserts(gm: torch.fx.GraphModule, ops: frozenset = ASSERT_OPS) -> bool:
    """Drop every call of ``ops`` from ``gm`` and its nested graphs."""
    return rewrite(gm, dict.fromkeys(ops, erase))


def _without_dead_code(gm: torch.fx.GraphModule) -> None:
    # the comparisons that computed an assertion's condition go with it (as ExecuTorch's)
    for mod in gm.modules():
        if isinstance(mod, torch.fx.GraphModule) and mod.graph.eliminate_dead_code():
            mod.recompile()


def remove_asserts(ep: ExportedProgram) -> bool:
    """``to_edge``'s form: every assertion of ``ep``'s graphs (``to_edge`` drops dead code
    once, at its end)."""
    return erase_asserts(ep.graph_module)


class RemoveGraphAssertsPass(PassBase):
    """Remove every assertion node (``_assert_async``, ``_assert_scalar``, the
    ``sym_constrain_range`` family, ``_assert_tensor_metadata``)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = erase_asserts(graph_module)
        _without_dead_code(graph_module)
        return PassResult(graph_module, changed)


class RemoveNonCoreAtenOpGraphAssertsPass(PassBase):
    """Remove the assertions that are not core ATen (``_assert_tensor_metadata``)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = erase_asserts(graph_module, NON_CORE_ASSERT_OPS)
        _without_dead_code(graph_module)
        return PassResult(graph_module, changed)
