"""Common subexpression elimination (ExecuTorch's ``exir.passes.cse_pass``).

Two calls of the same pure operator on the same inputs compute the same value: the later one
is dropped and its readers read the first. Nodes are visited in graph order, so by the time a
call is looked at its inputs are already the surviving ones, and repeated chains
(``neg(abs(x))`` twice) collapse link by link.

A call takes part only when that is safe: Python's operators on sizes (``operator.*``), and
ATen operators (ATen or Edge form) that write none of their arguments and are deterministic
(not ``rand``, ``dropout``...). Other namespaces' operators may hide side effects in their
kernels, and graph outputs are kept as they are (a mutated buffer's output is named by the
signature)."""

from __future__ import annotations

from typing import Any

import torch
from torch._ops import OpOverload
from torch.fx.passes.infra.pass_base import PassResult
from torch.utils import _pytree as pytree

from ..pass_base import ExportPass

NONDETERMINISTIC = frozenset({
    "aten::rand", "aten::rand_like", "aten::randn", "aten::randn_like", "aten::randint",
    "aten::randint_like", "aten::randperm", "aten::bernoulli", "aten::dropout",
    "aten::native_dropout", "aten::multinomial", "aten::normal", "aten::uniform",
})
_LEAVES = (torch.dtype, torch.device, torch.layout, torch.memory_format, str, type(None))


class _Unhashable(Exception):
    pass


def is_pure(target: object) -> bool:
    """Whether two calls of ``target`` on equal inputs always compute equal values."""
    if getattr(target, "__module__", None) == "_operator":
        return True
    if not isinstance(target, OpOverload):
        return False
    schema = target._schema
    return (schema.name.startswith("aten::") and schema.name not in NONDETERMINISTIC
            and not any(a.alias_info is not None and a.alias_info.is_write
                        for a in schema.arguments))


def _key(value: Any) -> Any:
    """A hashable stand-in for an argument; numbers keep their type (``1`` and ``1.0`` pick
    different dtypes)."""
    if isinstance(value, torch.fx.Node):
        return value
    if isinstance(value, (bool, int, float)):
        return (type(value), value)
    if isinstance(value, _LEAVES):
        return value
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *sorted((k, _key(v)) for k, v in value.items()))
    raise _Unhashable(type(value).__name__)


def eliminate_common_subexpressions(gm: torch.fx.GraphModule) -> bool:
    graph = gm.graph
    outputs = {a for a in pytree.tree_leaves(graph.output_node().args)
               if isinstance(a, torch.fx.Node)}
    seen: dict[Any, torch.fx.Node] = {}
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node in outputs or not is_pure(node.target):
            continue
        try:
            key = (node.target, _key(node.args), _key(node.kwargs))
        except _Unhashable:
            continue
        first = seen.setdefault(key, node)
        if first is not node:
            node.replace_all_uses_with(first)
            graph.erase_node(node)
            changed = True
    if changed:
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return changed


class CSEPass(ExportPass):
    """Drop repeated pure computations of ``graph_module``'s graph (see the module)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module, eliminate_common_subexpressions(graph_module))
