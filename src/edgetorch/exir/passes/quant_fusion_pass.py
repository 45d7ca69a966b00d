"""``QuantFusionPass``: ``dequantize -> add -> quantize`` becomes one quantized add
(ExecuTorch's ``exir.passes.quant_fusion_pass``, for the pattern its own tests build with
torch's FX reference quantization).

A per-tensor quantized add written out as ``dq(a) + dq(b)`` and re-quantized runs as
``quantized_decomposed::add``, whose kernel dequantizes, adds and quantizes in one step with the
same arithmetic, so integers stay integers between the two. Only the exact shape is fused: both
operands dequantized per tensor with scalar parameters, the sum's only user the quantize.
Quantized embeddings are fused by :func:`edgetorch.exir.passes.quant_fusion.
do_quant_fusion_and_const_prop` on the whole program.
"""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..dialects._ops import ops as exir_ops
from ..node_meta import copy_provenance

_ADD = (exir_ops.edge.aten.add.Tensor, torch.ops.aten.add.Tensor)
_DQ = (exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default,
       torch.ops.quantized_decomposed.dequantize_per_tensor.default)
_Q = (exir_ops.edge.quantized_decomposed.quantize_per_tensor.default,
      torch.ops.quantized_decomposed.quantize_per_tensor.default)


def _qparams(node: torch.fx.Node) -> list | None:
    """``[input, scale, zero_point, quant_min, quant_max]`` of a per-tensor (de)quantize whose
    parameters are Python scalars, else None."""
    if len(node.args) < 6 or not all(isinstance(a, (int, float)) for a in node.args[1:5]):
        return None
    return list(node.args[:5])


class QuantFusionPass(PassBase):
    def __init__(self, _fix_node_meta_val: bool = False) -> None:
        super().__init__()
        self._fix_node_meta_val = _fix_node_meta_val

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        fused = 0
        graph = graph_module.graph
        for q in list(graph.nodes):
            if q.op != "call_function" or q.target not in _Q:
                continue
            add = q.args[0]
            if not (isinstance(add, torch.fx.Node) and add.target in _ADD and len(add.users) == 1
                    and len(add.args) == 2 and add.kwargs.get("alpha", 1) == 1):
                continue
            a, b = add.args
            if not all(isinstance(n, torch.fx.Node) and n.target in _DQ for n in (a, b)):
                continue
            pa, pb, pq = _qparams(a), _qparams(b), _qparams(q)
            if None in (pa, pb, pq) or not (a.args[5] == b.args[5] == q.args[5]):
                continue
            target = (exir_ops.edge.quantized_decomposed.add.default
                      if q.target is _Q[0] else torch.ops.quantized_decomposed.add.default)
            with graph.inserting_before(q):
                new = graph.call_function(target, (*pa, *pb, *pq[1:]))
            copy_provenance(add, new)
            new.meta["val"] = q.meta.get("val")
            q.replace_all_uses_with(new)
            for dead in (q, add, a, b):
                if not dead.users:
                    graph.erase_node(dead)
            fused += 1
        if fused:
            graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, fused > 0)
