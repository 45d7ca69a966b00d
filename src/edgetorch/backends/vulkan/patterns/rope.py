"""Llama's rotary embedding (``examples/models/llama/rope.py``'s ``apply_rotary_emb``) as one
``et_vk.apply_rotary_emb``. Found by example graph: the function below, exported and lowered
to Edge once, and matched with literals (view shapes) ignored."""

from __future__ import annotations

import operator
from functools import lru_cache

import torch
from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from .pattern_registry import PatternMatch, register_pattern_graph, register_pattern_replacement


def _as_pairs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)


def _broadcastable(freqs: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[seq, d] -> [1, seq, 1, d]; [seq, heads, d] -> [1, seq, heads, d] (for 4-d ``x``)."""
    keep = {1, x.ndim - 1} if freqs.ndim == 2 else {x.ndim - 3, x.ndim - 2, x.ndim - 1}
    return freqs.view([d if i in keep else 1 for i, d in enumerate(x.shape)])


class LlamaRope(torch.nn.Module):
    """The computation the pattern stands for, written as Llama's export writes it."""

    def forward(self, xq, xk, freqs_cos, freqs_sin):
        xq_r, xq_i = _as_pairs(xq)
        xk_r, xk_i = _as_pairs(xk)
        cos, sin = _broadcastable(freqs_cos, xq_r), _broadcastable(freqs_sin, xq_r)
        xq_out = torch.stack([xq_r * cos - xq_i * sin, xq_r * sin + xq_i * cos], dim=-1)
        xk_out = torch.stack([xk_r * cos - xk_i * sin, xk_r * sin + xk_i * cos], dim=-1)
        return xq_out.flatten(3).type_as(xq), xk_out.flatten(3).type_as(xk)


@register_pattern_graph("export_llama_rope")
@lru_cache(maxsize=1)
def llama_rope_graphs() -> list[torch.fx.GraphModule]:
    from ....exir import EdgeCompileConfig, to_edge

    seq, heads, kv_heads, head_dim = 1, 4, 2, 32
    inputs = (torch.randn(1, seq, heads, head_dim), torch.randn(1, seq, kv_heads, head_dim),
              torch.randn(seq, head_dim // 2), torch.randn(seq, head_dim // 2))
    edge = to_edge(torch.export.export(LlamaRope(), inputs, strict=True),
                   compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return [edge.exported_program().graph_module]


@register_pattern_replacement("export_llama_rope")
def replace_llama_rope(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                       match: PatternMatch) -> None:
    if len(match.input_nodes) != 4 or len(match.output_nodes) != 2:
        return
    xq_out, xk_out = match.output_nodes
    graph = graph_module.graph
    with graph.inserting_before(xq_out):
        fused = graph.create_node("call_function", exir_ops.edge.et_vk.apply_rotary_emb.default,
                                  args=tuple(match.input_nodes))
    fused.meta["val"] = (xq_out.meta.get("val"), xk_out.meta.get("val"))
    for index, old in enumerate((xq_out, xk_out)):
        with graph.inserting_after(fused):
            item = graph.create_node("call_function", operator.getitem, args=(fused, index))
        item.meta["val"] = old.meta.get("val")
        old.replace_all_uses_with(item)
