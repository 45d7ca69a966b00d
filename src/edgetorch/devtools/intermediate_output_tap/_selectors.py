"""Which FX nodes to tap: predicates ``fx.Node -> bool`` and ways to combine them.

``select_by_op_type`` matches operators by (the end of) their name, the module selectors
match by the ``nn_module_stack`` a node was traced under -- by instance path (glob) or by
bare class name -- and ``select_any`` / ``select_all`` / ``select_not`` combine. The module
selectors by default keep only a module's *terminal* nodes (those none of whose users lie in
the same module instance): the values that leave the module.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

import torch.fx as fx

NodeSelector = Callable[[fx.Node], bool]


def select_all_call_function(exclude: tuple[str, ...] = ("getitem",)) -> NodeSelector:
    """Every ``call_function`` node whose target (by ``__name__`` or ``str``) is not in
    ``exclude``."""
    excluded = frozenset(exclude)

    def selected(n: fx.Node) -> bool:
        if n.op != "call_function":
            return False
        name = getattr(n.target, "__name__", str(n.target))
        return name not in excluded and str(n.target) not in excluded
    return selected


def select_by_op_type(*op_targets: str) -> NodeSelector:
    """``call_function`` nodes whose ``str(target)`` ends with one of ``op_targets`` (so a
    short ``"aten.linear.default"`` matches a qualified name too)."""
    if not op_targets:
        raise ValueError("select_by_op_type requires at least one op target")
    suffixes = tuple(op_targets)

    def selected(n: fx.Node) -> bool:
        return n.op == "call_function" and str(n.target).endswith(suffixes)
    return selected


def _entry_path(entry: object) -> str | None:
    """The instance path of an ``nn_module_stack`` value: ``(path, type)`` or a bare path."""
    if isinstance(entry, tuple):
        return entry[0] if entry else None
    return None if entry is None else str(entry)


def _class_name(module_type: object) -> str:
    """``Attention`` from a class or from a string such as ``"pkg.mod.Attention"``."""
    name = getattr(module_type, "__name__", None)
    return name if name is not None else str(module_type).rsplit(".", 1)[-1].rstrip("'>")


def _module_selector(entry_matches: Callable[[object], bool], output_only: bool) -> NodeSelector:
    def matching_ids(n: fx.Node) -> set:
        stack = n.meta.get("nn_module_stack") or {}
        return {key for key, entry in stack.items() if entry_matches(entry)}

    def inside(n: fx.Node) -> bool:
        return bool(matching_ids(n))

    def terminal(n: fx.Node) -> bool:
        ids = matching_ids(n)
        # a user traced inside one of the same module instances keeps the value inside
        return bool(ids) and not any(ids & (u.meta.get("nn_module_stack") or {}).keys()
                                     for u in n.users)
    return terminal if output_only else inside


def select_by_module_path(*patterns: str, output_only: bool = True) -> NodeSelector:
    """Nodes traced inside a module whose instance path matches one of the ``fnmatch``
    ``patterns`` (``"layers.*.attention"``); with ``output_only`` only the module's terminal
    nodes (see the module docstring)."""
    if not patterns:
        raise ValueError("select_by_module_path requires at least one pattern")
    pats = tuple(patterns)

    def matches(entry: object) -> bool:
        path = _entry_path(entry)
        return path is not None and any(fnmatch.fnmatchcase(path, p) for p in pats)
    return _module_selector(matches, output_only)


def select_by_module_class(*class_names: str, output_only: bool = True) -> NodeSelector:
    """Nodes traced inside an instance of one of ``class_names`` (bare names such as
    ``"RMSNorm"``); with ``output_only`` only the module's terminal nodes."""
    if not class_names:
        raise ValueError("select_by_module_class requires at least one class name")
    names = frozenset(class_names)

    def matches(entry: object) -> bool:
        return isinstance(entry, tuple) and len(entry) >= 2 and _class_name(entry[1]) in names
    return _module_selector(matches, output_only)


def select_any(*selectors: NodeSelector) -> NodeSelector:
    """Any of ``selectors`` matches (none given: nothing matches)."""
    chosen = tuple(selectors)
    return lambda n: any(s(n) for s in chosen)


def select_all(*selectors: NodeSelector) -> NodeSelector:
    """All of ``selectors`` match (none given: everything matches)."""
    chosen = tuple(selectors)
    return lambda n: all(s(n) for s in chosen)


def select_not(selector: NodeSelector) -> NodeSelector:
    """``selector`` does not match."""
    return lambda n: not selector(n)
