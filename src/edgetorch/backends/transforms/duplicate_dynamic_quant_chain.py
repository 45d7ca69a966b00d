"""``DuplicateDynamicQuantChainPass`` (ExecuTorch's name): one dynamic quantization chain
per consumer.

PT2E dynamic quantization quantizes an activation once, however many linears read it; an
LLM's attention reads one normalized input with its q, k and v projections. Run on the
converted ``GraphModule`` (before ``torch.export``), as ExecuTorch's LLM export does, so that
each linear has its own ``choose_qparams -> quantize -> dequantize`` and may be delegated on
its own.
"""

from __future__ import annotations

import operator

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

qd = torch.ops.quantized_decomposed


def _is_dynamic_dq(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target != qd.dequantize_per_tensor.tensor:
        return False
    q = node.args[0]
    return isinstance(q, torch.fx.Node) and q.target == qd.quantize_per_tensor.tensor and all(
        isinstance(a, torch.fx.Node) and a.target is operator.getitem
        and a.args[0].target == qd.choose_qparams.tensor for a in q.args[1:3])


class DuplicateDynamicQuantChainPass(PassBase):
    """Copy a shared dynamic quantization chain for every consumer after the first."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        changed = False
        for dq in [n for n in graph.nodes if _is_dynamic_dq(n)]:
            q = dq.args[0]
            choose = q.args[1].args[0]
            chain = [choose, *(u for u in choose.users if u.target is operator.getitem), q, dq]
            for user in list(dq.users)[1:]:
                copies: dict[torch.fx.Node, torch.fx.Node] = {}
                with graph.inserting_before(user):
                    for node in chain:
                        copies[node] = graph.node_copy(node, lambda a: copies.get(a, a))  # noqa: B023
                user.replace_input_with(dq, copies[dq])
                changed = True
        if changed:
            graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, changed)
