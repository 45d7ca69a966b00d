"""``reinplace_pass``: functional ops that may write into an input become in-place ops
(ExecuTorch's ``exir.passes.reinplace``; ``ExecutorchBackendConfig(run_reinplace_pass=True)``).

``index_put(buf, ...)`` whose ``buf`` is dead afterwards (or a mutable buffer/input) becomes
``index_put_(buf, ...)``: the result is ``buf`` itself, so memory planning gives it no bytes of
its own. The in-place overload is found by name (``X`` -> ``X_``) and schema (same arguments,
the first one ``Tensor(a!)``). An op without an in-place form is still marked: its output
shares its first tensor argument's bytes (``node.meta["_share_alloc_with_arg_idx"]``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..dialects._ops import ops

DEFAULT_INPLACEABLE_OPS: frozenset[Any] = frozenset({ops.edge.aten.index_put.default})


def _aten(op: Any) -> Any:
    """The ATen overload of an Edge op or a backend op wrapping one (an ATen one as is)."""
    return op if isinstance(op, torch._ops.OpOverload) else getattr(op, "_op", op)


def _writes_first_arg_of(functional: torch.FunctionSchema, inplace: torch.FunctionSchema) -> bool:
    f, c = functional.arguments, inplace.arguments
    if not c or len(f) != len(c):
        return False
    first = c[0].alias_info
    return first is not None and first.is_write and all(
        str(a.type) == str(b.type) for a, b in zip(f, c))


def _inplace_overload(op: Any) -> torch._ops.OpOverload | None:
    """``aten::X.<overload>`` -> the ``aten::X_`` overload with the same arguments."""
    schema = _aten(op)._schema
    namespace, _, base = schema.name.partition("::")
    packet = getattr(torch.ops.aten, base + "_", None) if namespace == "aten" else None
    if packet is None:
        return None
    for name in packet.overloads():
        candidate = getattr(packet, name)
        if _writes_first_arg_of(schema, candidate._schema):
            return candidate
    return None


def _check(functional: Any, inplace: Any) -> None:
    f, i = _aten(functional)._schema, _aten(inplace)._schema
    if not _writes_first_arg_of(f, i) or not i.name.startswith(f.name + "_"):
        raise ValueError(f"{inplace} is not the in-place form of {functional}: expected "
                         f"{f.name}_ with the same arguments and a Tensor(a!) first argument")


def _mutated_args(op: Any) -> tuple[int, ...]:
    schema = _aten(op)._schema
    written = {frozenset(r.alias_info.before_set) for r in schema.returns
               if r.alias_info is not None and r.alias_info.is_write}
    idx = tuple(i for i, a in enumerate(schema.arguments) if a.alias_info is not None
                and a.alias_info.is_write and frozenset(a.alias_info.before_set) in written)
    if not idx:
        raise ValueError(f"{op} declares no Tensor(a!) argument that it returns; an in-place "
                         "op's schema must say what it mutates")
    return idx


def _fits(arg: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Writing ``node``'s result into ``arg`` needs the same dtype and (provably) shape."""
    a, o = arg.meta.get("val"), node.meta.get("val")
    if not isinstance(a, torch.Tensor) or not isinstance(o, torch.Tensor):
        return True
    return a.dtype == o.dtype and a.dim() == o.dim() and all(
        statically_known_true(x == y) for x, y in zip(a.shape, o.shape))


def reinplace_pass(ep: ExportedProgram, ops_to_inplace: Iterable[Any] | None = None,
                   inplace_overrides: dict[Any, Any] | None = None) -> ExportedProgram:
    """Rewrite ``ops_to_inplace`` (default :data:`DEFAULT_INPLACEABLE_OPS`) in place where
    safe: the written argument is used by nothing later, and is not a graph input unless that
    input is mutable. ``inplace_overrides`` maps functional ops to in-place ones explicitly."""
    overrides = dict(inplace_overrides or {})
    wanted = set(DEFAULT_INPLACEABLE_OPS if ops_to_inplace is None else ops_to_inplace)
    wanted |= set(overrides)
    resolved: dict[Any, tuple[Any, tuple[int, ...]] | None] = {}
    for op in wanted:
        inplace = overrides.get(op) or _inplace_overload(op)
        if inplace is None:
            resolved[_aten(op)] = None  # no in-place form: share the first argument's bytes
            continue
        _check(op, inplace)
        resolved[_aten(op)] = (_aten(inplace), _mutated_args(inplace))

    gs = ep.graph_signature
    inputs = {n for n in ep.graph.nodes if n.op == "placeholder"}
    mutated_buffers = set(gs.buffers_to_mutate.values())
    mutable = {n for n in inputs if n.name in gs.user_inputs_to_mutate.values()
               or gs.inputs_to_buffers.get(n.name) in mutated_buffers}

    def safe(arg: Any, node: torch.fx.Node, used_later: set[torch.fx.Node]) -> bool:
        return (isinstance(arg, torch.fx.Node) and arg not in used_later and _fits(arg, node)
                and (arg not in inputs or arg in mutable))

    used_later: set[torch.fx.Node] = set()
    for node in reversed(list(ep.graph.nodes)):
        entry = resolved.get(_aten(node.target), False) if node.op == "call_function" else False
        if entry is None:  # annotation only
            first = next((i for i, a in enumerate(node.args) if isinstance(a, torch.fx.Node)), None)
            if first is not None and safe(node.args[first], node, used_later):
                node.meta["_share_alloc_with_arg_idx"] = first
                continue
        elif entry:
            inplace, written = entry
            if all(safe(node.args[i] if i < len(node.args) else None, node, used_later)
                   for i in written):
                used_later.update(node.args[i] for i in written)
                used_later.update(node.all_input_nodes)
                with ep.graph.inserting_before(node):
                    new = ep.graph.call_function(inplace, node.args, node.kwargs)
                new.meta = dict(node.meta)
                node.replace_all_uses_with(new)
                ep.graph.erase_node(node)
                continue
        if node.op == "call_function":
            used_later.update(node.all_input_nodes)
    # Outputs renamed by the rewrite keep the signature in step with the graph.
    out = ep.graph.output_node().args[0]
    for spec, arg in zip(ep.graph_signature.output_specs, out if isinstance(out, (list, tuple))
                         else (out,)):
        if isinstance(arg, torch.fx.Node) and getattr(spec.arg, "name", None) not in (None, arg.name):
            spec.arg.name = arg.name
    ep.graph_module.recompile()
    return ep
