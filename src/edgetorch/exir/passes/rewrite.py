"""``rewrite(gm, {op: rule})``: the loop every node-local pass shares.

A rule is a function of one ``call_function`` node whose target is the rule's key (Edge and
ATen overloads find the same rule: they compare equal). It edits the node in place -- retarget
it, replace it with new nodes (carrying provenance with ``copy_provenance``), or erase it --
and returns whether it changed anything. Rule tables are plain dicts, so passes compose with
``{**a, **b}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..ops import graph_modules

Rule = Callable[[torch.fx.Node], bool]


def rewrite(gm: torch.fx.GraphModule, rules: Mapping[object, Rule] | Rule) -> bool:
    """Apply ``rules`` to every matching node of ``gm`` and its nested graphs, in order
    (a single rule instead of a table is tried on every ``call_function`` node)."""
    table = rules if isinstance(rules, Mapping) else None
    changed = False
    for mod in list(graph_modules(gm)):
        touched = False
        for node in list(mod.graph.nodes):
            if node.op != "call_function" or node.graph is not mod.graph:
                continue
            rule = table.get(node.target) if table is not None else rules
            if rule is not None and rule(node):
                touched = True
        if touched:
            mod.graph.lint()
            mod.recompile()
            changed = True
    return changed


def erase(node: torch.fx.Node, replacement: object = None) -> bool:
    """Drop ``node``, routing its users to ``replacement`` (a rule's 1 -> 0 rewrite)."""
    if node.users:
        if replacement is None:
            return False
        node.replace_all_uses_with(replacement)
    node.graph.erase_node(node)
    return True
