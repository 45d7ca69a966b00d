"""``DuplicateDynamicQuantChainPass``: one dynamic-quantization chain per consumer.

After PT2E dynamic quantization (``convert_pt2e``), an activation read by several quantized ops
(two linears on the same input) has ONE chain ``choose_qparams.tensor -> getitem(scale),
getitem(zero_point) -> quantize_per_tensor.tensor -> dequantize_per_tensor.tensor`` feeding
them all. A backend that fuses "dynamic quantize + linear" into one kernel (XNNPACK's dynamically
quantized fully-connected) needs each consumer to own its chain, so this pass copies the chain
once per consumer, as ExecuTorch's pass of this name (``backends/transforms``) does:

* only dequantize nodes with two or more consumers (``sym_size`` readers do not count, and keep
  the original chain) whose quantize input comes from ``getitem``s of ``choose_qparams.tensor``;
* only when every counted consumer carries a valid quantizer annotation
  (``meta["quantization_annotation"]`` with an input or output qspec), i.e. was quantized on
  purpose; otherwise the graph is left alone.

Operators are matched by their ``quantized_decomposed`` names, so the pass needs neither torchao
nor the ops being registered.
"""

from __future__ import annotations

import logging
import operator

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["DuplicateDynamicQuantChainPass"]

logger = logging.getLogger(__name__)

Q_ANNOTATION_KEY = "quantization_annotation"  # torchao.quantization.pt2e.quantizer
_CHOOSE_QPARAMS = "quantized_decomposed.choose_qparams.tensor"
_QUANTIZE = {"quantized_decomposed.quantize_per_tensor.default",
             "quantized_decomposed.quantize_per_tensor.tensor",
             "quantized_decomposed.quantize_per_channel.default"}
_DEQUANTIZE = {"quantized_decomposed.dequantize_per_tensor.default",
               "quantized_decomposed.dequantize_per_tensor.tensor",
               "quantized_decomposed.dequantize_per_channel.default"}


def _is(node: object, names: set[str] | str) -> bool:
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    name = str(node.target)
    return name == names if isinstance(names, str) else name in names


def _is_sym_size(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and str(node.target).startswith("aten.sym_size")


def _annotated(node: torch.fx.Node) -> bool:
    ann = node.meta.get(Q_ANNOTATION_KEY)
    if ann is None:
        return False
    return bool(getattr(ann, "input_qspec_map", None)) or getattr(ann, "output_qspec", None) is not None


def _dynamic_chain(dq: torch.fx.Node) -> list[torch.fx.Node] | None:
    """``[choose_qparams, getitem(scale), getitem(zero_point), quantize]`` feeding ``dq``."""
    q = dq.args[0] if dq.args else None
    if not _is(q, _QUANTIZE) or len(q.args) < 3:
        return None
    scale, zero_point = q.args[1], q.args[2]
    if not (isinstance(scale, torch.fx.Node) and isinstance(zero_point, torch.fx.Node)):
        return None
    if scale.target is not operator.getitem or zero_point.target is not operator.getitem:
        return None
    choose = scale.args[0]
    if not _is(choose, _CHOOSE_QPARAMS) or zero_point.args[0] is not choose:
        return None
    return [choose, scale, zero_point, q]


def _copy_chain(graph: torch.fx.Graph, chain: list[torch.fx.Node], dq: torch.fx.Node
                ) -> torch.fx.Node:
    """Copies of ``chain + [dq]`` right after ``dq``, wired to each other; returns the new dq."""
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    anchor = dq
    for node in [*chain, dq]:
        with graph.inserting_after(anchor):
            anchor = graph.node_copy(node, lambda n: mapping.get(n, n))
        mapping[node] = anchor
    return anchor


class DuplicateDynamicQuantChainPass(PassBase):
    """See the module docstring. ``PassResult.modified`` says whether a chain was copied."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for dq in list(graph.nodes):
            if not _is(dq, _DEQUANTIZE):
                continue
            consumers = [u for u in dq.users if not _is_sym_size(u)]
            if len(consumers) < 2:
                continue
            chain = _dynamic_chain(dq)
            if chain is None:
                continue  # a static q/dq pair: backends handle shared dequantize nodes
            if not all(_annotated(u) for u in consumers):
                logger.info("not duplicating the dynamic quant chain of %s: a consumer was not "
                            "annotated by the quantizer", dq)
                continue
            for consumer in consumers[1:]:  # the first keeps the original chain
                consumer.replace_input_with(dq, _copy_chain(graph, chain, dq))
            modified = True
        if modified:
            graph.eliminate_dead_code()
            graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)
