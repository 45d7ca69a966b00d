"""``PatternMatcher``: the chains of ops a quantizer annotates as one unit.

Over nodes in graph order, a chain is a run of single-user edges (a fork or a node missing from
the iterator ends it). At each chain's head the longest pattern of the support table is tried
first; a pattern whose check rejects it gives way to the next shorter one. Every attempt is
reported (``PatternMatchResult``, accepted or with the reason it was rejected), and each node
joins at most one accepted match (``Q_PATTERN_MATCHED_KEY`` in its meta).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Node

from ...arm.quantizer.arm_quantizer_utils import PatternCheck

HISTC_UPPER_BOUND = 3.4028235e15  # torch.histc (HistogramObserver) works up to this value


@dataclass(frozen=True)
class PatternMatchResult:
    pattern: list[Node]
    accepted: bool
    message: str | None = None


def is_large_scalar(node: Node, gm: GraphModule) -> bool:
    """A one-element constant or fill too large for the histogram observer."""
    if node.op == "get_attr" and isinstance(node.target, str):
        t = gm
        for part in node.target.split("."):
            t = getattr(t, part)
        return t.numel() == 1 and abs(t.item()) > HISTC_UPPER_BOUND
    if node.op == "call_function" and node.target in (torch.ops.aten.full.default,
                                                      torch.ops.aten.fill_.Scalar):
        return abs(float(node.args[1])) > HISTC_UPPER_BOUND
    return False


def _is_io(node: Node) -> bool:
    return node.op in ("placeholder", "output")


class PatternMatcher:
    Q_PATTERN_MATCHED_KEY = "quantizer_matched"
    REJECT_PREVIOUSLY_ANNOTATED = "Tried annotating already quantized node."
    REJECT_UNSUPPORTED_PATTERN = "Tried annotating unsupported configuration of operators"
    REJECT_UNSUPPORTED_QCONFIG = "Tried annotating unsupported quantization config"
    REJECT_LARGE_SCALAR = ("Tried annotating a large constant scalar value that is not "
                           "supported for quantization.")

    def __init__(self, support_dict: dict[tuple, type[PatternCheck] | None],
                 support_dict_name: str | None = None) -> None:
        self.support_dict = support_dict
        self.support_dict_name = support_dict_name
        self.max_pattern_len = max((len(p) for p in support_dict), default=0)

    def _mark(self, match: list[Node]) -> PatternMatchResult:
        for node in match:
            node.meta[self.Q_PATTERN_MATCHED_KEY] = True
        return PatternMatchResult(match, True)

    def _validate(self, match: list[Node], config) -> PatternMatchResult:
        if any(n.meta.get(self.Q_PATTERN_MATCHED_KEY, False) for n in match):
            return PatternMatchResult(match, False, self.REJECT_PREVIOUSLY_ANNOTATED)
        gm = match[0].graph.owning_module
        if gm is not None and any(is_large_scalar(n, gm) for n in match):
            return PatternMatchResult(match, False, self.REJECT_LARGE_SCALAR)
        if all(_is_io(n) for n in match):
            return self._mark(match)
        check = self.support_dict.get(tuple(n.target for n in match))
        if check is not None:
            if not check.check_pattern(match):
                return PatternMatchResult(match, False, self.REJECT_UNSUPPORTED_PATTERN)
            if not check.check_quantization_config(match, config):
                return PatternMatchResult(match, False, self.REJECT_UNSUPPORTED_QCONFIG)
        return self._mark(match)

    def _longest(self, queue: list[Node]) -> list[Node]:
        if _is_io(queue[0]):
            return [queue[0]]
        key = tuple(n.target for n in queue)
        while key and key not in self.support_dict:
            key = key[:-1]
        return queue[:len(key)]

    def _dequeue(self, queue: list[Node], config) -> list[PatternMatchResult]:
        """Every match tried at the queue's head, longest first, down to the first accepted
        one; the accepted match's nodes (or else the head alone) leave the queue."""
        if config is None:  # annotating with None keeps the node float: always possible
            node = queue.pop(0)
            if node.meta.get(self.Q_PATTERN_MATCHED_KEY, False):
                return [PatternMatchResult([node], False, self.REJECT_PREVIOUSLY_ANNOTATED)]
            return [self._mark([node])]
        tried: list[PatternMatchResult] = []
        limit = len(queue)
        while limit > 0:
            match = self._longest(queue[:limit])
            limit = len(match) - 1
            if match:
                tried.append(self._validate(match, config))
                if tried[-1].accepted:
                    del queue[:len(match)]
                    return tried
        queue.pop(0)
        return tried

    def find_pattern_matches(self, nodes: Iterator[Node], quantization_config
                             ) -> Iterator[PatternMatchResult]:
        node = next(nodes, None)
        queue: list[Node] = []
        while node is not None:
            queue.append(node)
            nxt = next(nodes, None)
            users = list(node.users)
            if len(users) != 1 or users[0] is not nxt:  # a fork or a gap ends the chain
                while queue:
                    yield from self._dequeue(queue, quantization_config)
            elif len(queue) >= self.max_pattern_len:
                yield from self._dequeue(queue, quantization_config)
            node = nxt
