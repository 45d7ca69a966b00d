"""The subgraphs of control-flow operators (ExecuTorch's ``exir.graph_module``): a ``cond``'s
two branches, a ``map_impl``/``scan`` body, a ``while_loop``'s condition and body, each as
``(attribute name, graph module, the node calling it)``; top level only, not nested ones."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch

from .dialects.edge._ops import EdgeOpOverload

_hop = torch.ops.higher_order
# operator -> the argument positions holding its subgraphs
CONTROL_FLOW_SUBMODULE_ARGS = {_hop.cond: (1, 2), _hop.map_impl: (0,), _hop.scan: (0,)}
COND_WHILE_SUBMODULE_ARGS = {_hop.cond: (1, 2), _hop.while_loop: (0, 1)}

Submodule = tuple[str, torch.fx.GraphModule, torch.fx.Node]
# The leaf values a graph passes around (ExecuTorch's annotation).
LeafValue = torch.Tensor | str | int | float | bool | complex | torch.dtype | torch.device \
    | torch.memory_format | torch.layout | None


def _get_submodule(graph_module: torch.fx.GraphModule, node: torch.fx.Node,
                   arg_index: int) -> Submodule:
    attr = node.args[arg_index]
    if not (isinstance(attr, torch.fx.Node) and attr.op == "get_attr"):
        raise TypeError(f"argument {arg_index} of %{node.name} is not a get_attr of a subgraph")
    return attr.target, graph_module.get_submodule(attr.target), node  # type: ignore[return-value]


def _submodules(graph_module: torch.fx.GraphModule,
                args: dict[Any, tuple[int, ...]]) -> list[Submodule]:
    return [_get_submodule(graph_module, node, i) for node in graph_module.graph.nodes
            if node.op == "call_function" for i in args.get(node.target, ())]


def get_control_flow_submodules(graph_module: torch.fx.GraphModule) -> list[Submodule]:
    """The subgraphs of ``cond``, ``map_impl`` and ``scan`` calls in ``graph_module``."""
    return _submodules(graph_module, CONTROL_FLOW_SUBMODULE_ARGS)


def get_cond_while_submodules(graph_module: torch.fx.GraphModule) -> list[Submodule]:
    """The subgraphs of ``cond`` and ``while_loop`` calls in ``graph_module``."""
    return _submodules(graph_module, COND_WHILE_SUBMODULE_ARGS)


def get_scan_submodules(graph_module: torch.fx.GraphModule) -> list[Submodule]:
    return _submodules(graph_module, {_hop.scan: (0,)})


def bfs_trace_with_node_process(gm: torch.fx.GraphModule,
                                node_op: Callable[[torch.fx.Node], None]) -> None:
    """Call ``node_op`` on every node of ``gm`` and of its nested control-flow subgraphs."""
    queue = [gm]
    while queue:
        current = queue.pop(0)
        for node in current.graph.nodes:
            node_op(node)
        queue.extend(sub for _, sub, _ in get_control_flow_submodules(current))


def contains_any_call_fn_target_op(graph_module: torch.fx.GraphModule,
                                   ops: Collection[Any]) -> bool:
    """Does ``graph_module`` or a nested control-flow subgraph call one of ``ops``? An Edge
    operator counts as the ATen overload it stands for."""
    if not ops:
        return False
    found = False

    def visit(node: torch.fx.Node) -> None:
        nonlocal found
        target = node.target._op if isinstance(node.target, EdgeOpOverload) else node.target
        if node.op == "call_function" and target in ops:
            found = True

    bfs_trace_with_node_process(graph_module, visit)
    return found
