"""``Partitioner.ops_to_not_decompose`` for ``to_edge_transform_and_lower``.

The named operators are kept out of the core-ATen decomposition table, so the backend sees
``aten.linear`` rather than ``permute_copy`` + ``addmm``. When the partitioner also gives a
filter, nodes the filter turns down are decomposed after all: the accepted ones are parked
on a private wrapper operator (which no table decomposes) while everything else is
decomposed, then put back. A kept node that no partitioner took and that the filter, asked
again after lowering, declines (its backend found it could not lower it) is decomposed then,
so it runs on the portable kernels rather than failing the export.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import torch
from torch._export.passes.replace_view_ops_with_view_copy_ops_pass import (
    get_view_copy_of_view_op,
)
from torch._guards import detect_fake_mode
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from ...errors import ExportError
from ..edge import as_edge_op, name_edge_nodes
from ..node_meta import copy_provenance
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
    # the schema's own annotations: torchgen's parse misses a list of aliases (split.Tensor
    # returns Tensor(a)[]), which a return's alias_info shows
    schema = op._schema
    if schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
        logger.warning("%s cannot be kept from decomposition (it mutates or aliases); "
                       "it is decomposed", op)
        return False
    return True


def _remove_invalid_ops_for_not_decompose(ops: list[OpOverload]) -> list[OpOverload]:
    """The operators of ``ops`` that can stay whole: none that mutates an argument or returns
    an alias of one (memory planning needs views and writes as copies). ExecuTorch's name."""
    return [op for op in ops if _can_preserve(op)]


def preserved_ops(ep: ExportedProgram, partitioners: list[Partitioner]) -> Preserved:
    """What each partitioner wants kept, with its filter."""
    out = []
    for p in partitioners:
        ops, node_filter = p.ops_to_not_decompose(ep)
        out.append((p, _remove_invalid_ops_for_not_decompose(ops), node_filter))
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


def _edge_targets(ops: list[OpOverload]) -> set:
    return set(ops) | {as_edge_op(op) for op in ops}


def decompose_declined(ep: ExportedProgram, preserved: Preserved, table: dict) -> bool:
    """Decompose (with ``table``) the kept nodes left in ``ep`` after lowering that their
    partitioner's filter now declines. True if any was."""
    changed = False
    for _, ops, node_filter in preserved:
        if node_filter is None:
            continue
        targets = _edge_targets(ops)
        for node in list(ep.graph.nodes):
            if node.op == "call_function" and node.target in targets and not node_filter(node):
                logger.info("%%%s (%s) was kept whole for a backend that did not take it; "
                            "decomposed for the portable kernels", node.name, node.target)
                _splice_decomposition(ep.graph_module, node, table)
                changed = True
    if changed:
        ep.graph_module.graph.lint()
        ep.graph_module.recompile()
    return changed


def _splice_decomposition(gm: torch.fx.GraphModule, node: torch.fx.Node, table: dict) -> None:
    """Replace ``node`` by its decomposition, traced on the node's fake values, in Edge form
    (views as copies, as ``to_edge`` writes them)."""
    op = getattr(node.target, "_op", node.target)
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    where = [i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node)]
    values = [flat[i].meta["val"] for i in where]

    def call(*tensors):
        args = list(flat)
        for i, t in zip(where, tensors):
            args[i] = t
        a, kw = pytree.tree_unflatten(args, spec)
        return op(*a, **kw)

    with detect_fake_mode(values):
        sub = make_fx(call, decomposition_table=table)(*values)
    env: dict[torch.fx.Node, object] = {}
    inputs = iter(flat[i] for i in where)
    result = None
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(inputs)
        elif n.op == "call_function":
            target = n.target
            if isinstance(target, OpOverload):
                target = get_view_copy_of_view_op(target._schema) or target
                if target == torch.ops.aten._unsafe_view.default:
                    target = torch.ops.aten.view_copy.default
            with gm.graph.inserting_before(node):
                new = gm.graph.call_function(as_edge_op(target),
                                             *torch.fx.node.map_arg((n.args, n.kwargs), env.get))
            new.meta["val"] = n.meta.get("val")
            copy_provenance(node, new)
            env[n] = new
        elif n.op == "output":
            result = torch.fx.node.map_arg(n.args[0], env.get)
    node.replace_all_uses_with(result)
    gm.graph.erase_node(node)
