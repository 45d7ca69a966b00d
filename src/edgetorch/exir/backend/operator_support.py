"""Operator checks a partitioner can be given to keep nodes out of a delegate (ExecuTorch's
``exir/backend/operator_support`` names): by operator, by node name, or by the module a node
came from. Each check remembers the nodes it rejected."""

from __future__ import annotations

from torch import fx
from torch.fx.passes.operator_support import OperatorSupportBase

__all__ = ["DontPartition", "DontPartitionModule", "DontPartitionName", "DontSupportBase",
           "OperatorSupportBase"]


def _matches(exact: bool, wanted: str | None, name: str) -> bool:
    if not wanted:
        return False
    return wanted == name if exact else wanted in name


class DontSupportBase(OperatorSupportBase):
    def __init__(self) -> None:
        self._rejected_nodes: list[fx.Node] = []

    def reject_node(self, node: fx.Node) -> None:
        self._rejected_nodes.append(node)

    def rejected_nodes(self) -> list[fx.Node]:
        return self._rejected_nodes

    def num_rejected(self) -> int:
        return len(self._rejected_nodes)

    def has_rejected_node(self) -> bool:
        return bool(self._rejected_nodes)

    def _reject(self, node: fx.Node) -> bool:
        self.reject_node(node)
        return False


class DontPartition(DontSupportBase):
    """Reject nodes by operator: an Edge or ATen overload, or a string matched against the
    ATen operator the node came from (``meta["original_aten"]``; ``exact=False`` matches a
    part of it)."""

    def __init__(self, *targets, exact: bool = True) -> None:
        super().__init__()
        self.targets, self.exact = targets, exact

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if node.target in self.targets:
            return self._reject(node)
        original = node.meta.get("original_aten")
        if original is not None and any(_matches(self.exact, str(t), str(original))
                                        for t in self.targets):
            return self._reject(node)
        return True


class DontPartitionName(DontSupportBase):
    """Reject nodes by ``node.name`` (``exact=False`` matches a part of it)."""

    def __init__(self, *targets, exact: bool = True) -> None:
        super().__init__()
        self.targets, self.exact = targets, exact

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if any(_matches(self.exact, t, node.name) for t in self.targets):
            return self._reject(node)
        return True


class DontPartitionModule(DontSupportBase):
    """Reject nodes traced inside a module, named by its class (``module_name``: the bare
    class name, or with a dot the full dotted path) or by its instance name."""

    def __init__(self, *, module_name: str | None = None, instance_name: str | None = None,
                 exact: bool = True) -> None:
        super().__init__()
        self.module_name, self.instance_name, self.exact = module_name, instance_name, exact
        self.dotted = "." in module_name if module_name else True

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        for instance, cls_path in node.meta.get("nn_module_stack", {}).values():
            cls_name = cls_path if self.dotted else cls_path.split(".")[-1]
            if (_matches(self.exact, self.instance_name, instance)
                    or _matches(self.exact, self.module_name, cls_name)):
                return self._reject(node)
        return True
