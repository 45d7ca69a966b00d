"""Node finders: which nodes of a graph a quantization config applies to (ExecuTorch's
``cortex_m/quantizer/node_finders`` names). Each finder yields nodes in graph order and prints
what it targets."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from torch.fx import GraphModule, Node

from ...arm.quantizer.arm_quantizer_utils import (
    NodeFinder,
    module_name_filter,
    module_type_filter,
)


def _as_list(item_or_list) -> list:
    return list(item_or_list) if isinstance(item_or_list, (list, tuple)) else [item_or_list]


def _joined(items) -> str:
    return ", ".join(str(i) for i in items)


class GlobalNodeFinder(NodeFinder):
    """Every node."""

    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        yield from model.graph.nodes

    def __repr__(self) -> str:
        return f"{type(self).__name__} targeting all nodes"


class InputNodeFinder(NodeFinder):
    """The placeholders (parameters, buffers and user inputs)."""

    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        yield from model.graph.find_nodes(op="placeholder")

    def __repr__(self) -> str:
        return f"{type(self).__name__} targeting all placeholder nodes"


class OutputNodeFinder(NodeFinder):
    """The output node."""

    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        yield from model.graph.find_nodes(op="output")

    def __repr__(self) -> str:
        return f"{type(self).__name__} targeting the output node"


class NodeNameNodeFinder(NodeFinder):
    """Nodes by ``node.name``."""

    def __init__(self, names: str | list[str]) -> None:
        self.names = _as_list(names)

    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        wanted = set(self.names)
        return (n for n in model.graph.nodes if n.name in wanted)

    def __repr__(self) -> str:
        return f"{type(self).__name__} targeting names: {_joined(self.names)}"


class NodeTargetNodeFinder(NodeFinder):
    """Nodes calling one of the given operators."""

    def __init__(self, targets) -> None:
        self.targets = _as_list(targets)

    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        return (n for n in model.graph.nodes if n.target in self.targets)

    def __repr__(self) -> str:
        names = [t.name() if hasattr(t, "name") else str(t) for t in self.targets]
        return f"{type(self).__name__} targeting node targets: {_joined(names)}"


class _ModuleNodeFinder(NodeFinder):
    filters: list[Callable[[Node], bool]]

    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        return (n for n in model.graph.nodes if any(f(n) for f in self.filters))


class ModuleNameNodeFinder(_ModuleNodeFinder):
    """Nodes traced inside the named submodules (dotted paths, children included)."""

    def __init__(self, module_names: str | list[str]) -> None:
        self.module_names = _as_list(module_names)
        self.filters = [module_name_filter(name) for name in self.module_names]

    def __repr__(self) -> str:
        return f"{type(self).__name__} targeting module names: {_joined(self.module_names)}"


class ModuleTypeNodeFinder(_ModuleNodeFinder):
    """Nodes traced inside modules of the given classes."""

    def __init__(self, module_types: type | list[type]) -> None:
        self.module_types = _as_list(module_types)
        self.filters = [module_type_filter(tp) for tp in self.module_types]

    def __repr__(self) -> str:
        names = [tp.__name__ for tp in self.module_types]
        return f"{type(self).__name__} targeting module types: {_joined(names)}"
