"""Functional operators -> ``.out`` variants writing into ``memory.alloc`` buffers."""

from __future__ import annotations

import operator

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassResult

from ...errors import ExportError
from .. import memory
from ..node_meta import copy_provenance
from ..ops import describe_node, is_out_variant, out_arg_names, out_variant
from .executorch_prim_ops_registry import SYM_OPS
from .rewrite import rewrite
from .spec_prop import upper_bound

# Ops the runtime implements directly (they return a scalar, not an out tensor).
NO_OUT_VARIANT = {torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
                  torch.ops.aten._local_scalar_dense.default}


def _alloc(graph: torch.fx.Graph, val: torch.Tensor, before: torch.fx.Node) -> torch.fx.Node:
    shape = tuple(upper_bound(s) for s in val.shape)
    with graph.inserting_before(before):
        node = graph.call_function(memory.alloc, ((shape, val.dtype),))
    node.meta["val"] = val
    copy_provenance(before, node)
    return node


def _to_out_variant(node: torch.fx.Node) -> bool:
    op = node.target
    if not isinstance(op, OpOverload) or op in NO_OUT_VARIANT or op in SYM_OPS \
            or is_out_variant(op) or is_inplace(op):
        return False
    out_op = out_variant(op)
    if out_op is None:
        raise ExportError(
            f"operator {op} has no out variant, so the runtime cannot call it.\n"
            f"  {describe_node(node)}\n  Try: decompose it (leave it out of preserve_ops) "
            "or lower it to a backend."
        )
    val = node.meta["val"]
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    names = out_arg_names(out_op)
    # A result the graph does not compute (None, e.g. an unused gradient) gets no buffer.
    allocs = [None if v is None else _alloc(node.graph, v, node) for v in vals]
    accepted = {a.name for a in out_op._schema.arguments}
    kwargs = {k: v for k, v in node.kwargs.items() if k in accepted}
    out_args = [a for a in out_op._schema.arguments if a.is_out]
    if len(out_args) == 1 and isinstance(out_args[0].type, torch.ListType):
        kwargs[names[0]] = allocs  # one ``Tensor(a!)[] out``, e.g. split_with_sizes_copy
    else:
        kwargs.update(zip(names, allocs))
    node.meta["functional_target"] = op  # which outputs are differentiable (spec_prop)
    node.target = out_op  # the ATen ``.out`` overload: what the emitter names
    node.kwargs = kwargs
    return True


def to_out_variants(ep: ExportedProgram) -> bool:
    """Functional operators (Edge or ATen) -> their ATen ``.out`` overloads writing into
    ``memory.alloc`` buffers."""
    return rewrite(ep.graph_module, _to_out_variant)


class ToOutVarPass:
    """ExecuTorch's graph-module pass: functional calls -> ``.out`` calls into ``memory.alloc``
    buffers (an alloc gets its call's spec when specs exist already)."""

    def __call__(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = rewrite(graph_module, _to_out_variant)
        return PassResult(graph_module, changed)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return self(graph_module)


def is_inplace(op: OpOverload) -> bool:
    """An op that writes into one of its own inputs and returns it (e.g. the ``copy_`` of a
    buffer write-back). A mutating op with a fresh result (``llama::update_cache``) is not:
    it has an ``.out`` variant like any functional op."""
    schema = op._schema
    if not schema.is_mutable or is_out_variant(op):
        return False
    returns = schema.returns
    return not returns or any(r.alias_info is not None and r.alias_info.is_write
                              for r in returns)


def mutated_arg_index(op: OpOverload) -> int | None:
    """Position of the argument an in-place op writes (and returns)."""
    for i, a in enumerate(op._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            return i
    return None


def is_alloc(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is memory.alloc


def is_getitem(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is operator.getitem
