"""``Partitioner.ops_to_not_decompose`` for ``to_edge_transform_and_lower``.

The named operators are kept out of the core-ATen decomposition table, so the backend sees
``aten.linear`` rather than ``permute_copy`` + ``addmm``. When the partitioner also gives a
filter, nodes the filter turns down are decomposed after all: the accepted ones are parked
on a private wrapper operator (which no table decomposes) while everything else is
decomposed, then put back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram

from ...errors import ExportError
from ..edge import as_edge_op, name_edge_nodes
from .partitioner import Partitioner

logger = logging.getLogger(__name__)

NodeFilter = Callable[[torch.fx.Node], bool]
Preserved = list[tuple[Partitioner, list[OpOverload], NodeFilter | None]]

_LIB = torch.library.Library("edgetorch_preserve", "FRAGMENT")


def partitioners_by_method(partitioner, methods) -> dict[str, list[Partitioner]]:
    """``None`` / a list for every method / ``{method: list}`` -> ``{method: list}``."""
    if partitioner is None:
        return {name: [] for name in methods}
    if isinstance(partitioner, dict):
        unknown = set(partitioner) - set(methods)
        if unknown:
            raise ExportError(f"partitioners given for unknown methods {sorted(unknown)}; "
                              f"the methods are {sorted(methods)}")
        return {name: _as_list(partitioner.get(name)) for name in methods}
    return {name: _as_list(partitioner) for name in methods}


def _as_list(p) -> list[Partitioner]:
    if p is None:
        return []
    return [p] if isinstance(p, Partitioner) else list(p)


def _can_preserve(op: OpOverload) -> bool:
    schema = op._schema
    if schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
        logger.warning("%s cannot be kept from decomposition (it mutates or aliases); "
                       "it is decomposed", op)
        return False
    return True


def preserved_ops(ep: ExportedProgram, partitioners: list[Partitioner]) -> Preserved:
    """What each partitioner wants kept, with its filter."""
    out = []
    for p in partitioners:
        ops, node_filter = p.ops_to_not_decompose(ep)
        out.append((p, [op for op in ops if _can_preserve(op)], node_filter))
    return out


def all_ops(preserved: Preserved) -> list[OpOverload]:
    return [op for _, ops, _ in preserved for op in ops]


@functools.cache
def _wrapper(op: OpOverload) -> OpOverload:
    """``edgetorch_preserve::<ns>_<name>_<overload>``: same schema, runs ``op``."""
    name = f"{op.namespace}_{op._schema.name.split('::')[1]}_{op._overloadname}"
    signature = str(op._schema).split("(", 1)[1]
    _LIB.define(f"{name}({signature}")
    for key in ("CompositeExplicitAutograd", "Meta"):
        _LIB.impl(name, lambda *args, _op=op, **kwargs: _op(*args, **kwargs), key)
    return getattr(torch.ops.edgetorch_preserve, name).default


def park_accepted(ep: ExportedProgram, preserved: Preserved) -> dict[OpOverload, OpOverload]:
    """Move the nodes the filters accept onto wrapper ops; returns wrapper -> original."""
    parked: dict[OpOverload, OpOverload] = {}
    filtered = [(set(ops), f) for _, ops, f in preserved if f is not None]
    # Decide for every node before parking any: a filter may look at its neighbours' targets.
    accepted = [node for node in ep.graph.nodes if node.op == "call_function" and any(
        node.target in ops and node_filter(node) for ops, node_filter in filtered)]
    for node in accepted:
        wrapper = _wrapper(node.target)
        parked[wrapper] = node.target
        node.target = wrapper
    ep.graph_module.recompile()
    return parked


def unpark(ep: ExportedProgram, parked: dict[OpOverload, OpOverload]) -> None:
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target in parked:
            node.target = as_edge_op(parked[node.target])
    name_edge_nodes(ep)  # the kept ops take their Edge names, as the rest of the graph did


def has_filter(preserved: Preserved) -> bool:
    return any(f is not None for _, _, f in preserved)


def check_consumed(method: str, ep: ExportedProgram, preserved: Preserved) -> None:
    """Every kept operator must have gone to a backend: none has a portable fallback."""
    for p, ops, node_filter in preserved:
        for node in ep.graph.nodes:
            if node.op != "call_function" or node.target not in ops:
                continue
            if node_filter is not None and not node_filter(node):
                continue
            raise ExportError(
                f"method {method!r}: node %{node.name} ({node.target}) was neither decomposed "
                f"nor delegated. {type(p).__name__}.ops_to_not_decompose asked to keep it "
                "whole, but its partition() did not take it. Make partition() take every node "
                "it keeps (or return a filter that lets this one be decomposed).")
