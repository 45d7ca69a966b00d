"""The Vulkan delegate's fusable patterns (see ``pattern_registry``): finding them for the
partitioner, and replacing them in the preprocess (``FusePatternsPass``)."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.passes.utils.matcher_utils import SubgraphMatcher

# Registration order is detection order (ExecuTorch's): quantized binary, convolution,
# embedding, linear, pixel shuffle, unary, then RMSNorm, RoPE, HF RoPE, SDPA, select.
from . import (  # noqa: E402, F401
    quantized_embedding,
    quantized_linear,
    quantized_linear_4bit,
    quantized_pixel_shuffle,
    rms_norm,
    rope,
)
from .pattern_registry import (
    CreateReplacementFn,
    DetectorFn,
    GetGraphFn,
    PatternMatch,
    create_pattern_match_from_internal_match,
    fusable_patterns,
    register_pattern_detector,
    register_pattern_graph,
    register_pattern_replacement,
)

__all__ = ["CreateReplacementFn", "DetectorFn", "GetGraphFn", "PatternMatch",
           "fusable_patterns", "get_all_fusable_subgraphs", "register_pattern_detector",
           "register_pattern_graph", "register_pattern_replacement",
           "replace_all_fusable_subgraphs"]


def all_fusable_graph_patterns() -> list[torch.fx.GraphModule]:
    return [g for e in fusable_patterns.values() if e.get_graphs_fn is not None
            for g in e.get_graphs_fn()]


def _graph_matches(pattern: torch.fx.GraphModule, graph: torch.fx.Graph) -> list[PatternMatch]:
    matcher = SubgraphMatcher(pattern.graph, ignore_literals=True)
    return [create_pattern_match_from_internal_match(m) for m in matcher.match(graph)]


def get_all_fusable_subgraphs(graph_module: torch.fx.GraphModule) -> list[PatternMatch]:
    """Every match of every pattern: example-graph matches first, then detector matches in
    node order."""
    found = []
    for pattern in all_fusable_graph_patterns():
        found.extend(_graph_matches(pattern, graph_module.graph))
    for node in graph_module.graph.nodes:
        for entry in fusable_patterns.values():
            if entry.detector_fn is not None:
                match = entry.detector_fn(node)
                if match is not None:
                    found.append(match)
    return found


def replace_all_fusable_subgraphs(ep: ExportedProgram, graph_module: torch.fx.GraphModule) -> int:
    """Replace every match with its fused operator; returns how many were replaced."""
    total = 0
    for entry in fusable_patterns.values():
        if entry.get_graphs_fn is None or entry.create_replacement_fn is None:
            continue
        for pattern in entry.get_graphs_fn():
            for match in _graph_matches(pattern, graph_module.graph):
                entry.create_replacement_fn(ep, graph_module, match)
                total += 1
                graph_module.graph.eliminate_dead_code()  # so it does not match again
    for node in graph_module.graph.nodes:
        for entry in fusable_patterns.values():
            if entry.detector_fn is None or entry.create_replacement_fn is None:
                continue
            match = entry.detector_fn(node)
            if match is not None:
                entry.create_replacement_fn(ep, graph_module, match)
                total += 1
    graph_module.graph.eliminate_dead_code()
    return total
