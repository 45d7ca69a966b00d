"""Fusable patterns: subgraphs the Vulkan delegate runs as one operator (RMSNorm, RoPE, SDPA,
quantized convolutions...). A pattern is found either by example graphs (``torch.fx``'s
``SubgraphMatcher``) or by a detector function run on every node, and rewritten by its
replacement function; the partitioner takes a match's nodes whole."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.fx.passes.utils.matcher_utils import InternalMatch

GetGraphFn = Callable[[], list[torch.fx.GraphModule]]
DetectorFn = Callable[[torch.fx.Node], "PatternMatch | None"]
CreateReplacementFn = Callable[[ExportedProgram, torch.fx.GraphModule, "PatternMatch"], None]


class PatternMatch:
    """The nodes of one match: its inputs, outputs, all nodes it computes, and the node the
    match is anchored on (a detector's)."""

    __slots__ = ("input_nodes", "output_nodes", "all_nodes", "anchor_node")

    def __init__(self, input_nodes: list, output_nodes: list, all_nodes: list,
                 anchor_node: torch.fx.Node | None = None) -> None:
        self.input_nodes = input_nodes
        self.output_nodes = output_nodes
        self.all_nodes = all_nodes
        self.anchor_node = anchor_node


def create_pattern_match_from_internal_match(m: InternalMatch) -> PatternMatch:
    """A match's nodes without those its placeholders matched: those only feed the pattern,
    and claiming them would let them skip the partitioner's own checks."""
    feeders = set(m.placeholder_nodes)
    return PatternMatch(m.placeholder_nodes, m.returning_nodes,
                        [n for n in m.nodes_map.values() if n not in feeders])


@dataclass
class PatternEntry:
    get_graphs_fn: GetGraphFn | None = None
    detector_fn: DetectorFn | None = None
    create_replacement_fn: CreateReplacementFn | None = None

    def is_valid(self) -> bool:
        found = self.get_graphs_fn is not None or self.detector_fn is not None
        return found and self.create_replacement_fn is not None


fusable_patterns: dict[str, PatternEntry] = {}


def _entry(name: str) -> PatternEntry:
    return fusable_patterns.setdefault(name, PatternEntry())


def register_pattern_graph(name: str):
    def deco(fn: GetGraphFn) -> GetGraphFn:
        assert _entry(name).detector_fn is None, f"pattern {name} already has a detector"
        fusable_patterns[name].get_graphs_fn = fn
        return fn
    return deco


def register_pattern_detector(name: str):
    def deco(fn: DetectorFn) -> DetectorFn:
        assert _entry(name).get_graphs_fn is None, f"pattern {name} already has graphs"
        fusable_patterns[name].detector_fn = fn
        return fn
    return deco


def register_pattern_replacement(name: str):
    def deco(fn: CreateReplacementFn) -> CreateReplacementFn:
        _entry(name).create_replacement_fn = fn
        return fn
    return deco
