"""Fold operators whose inputs are all constants into new constants.

The typical case is the weight transpose ``permute_copy(linear.weight)`` that decomposing
``Linear`` produces: ExecuTorch runs it on every call and plans memory for it; folding stores
the transposed weight instead. A fold is taken only when the constants it consumes die with it
and the result is no larger than they were, so the file never grows.
"""

from __future__ import annotations

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from ..node_meta import copy_provenance
from ..signature import constant_placeholders

# Ops with side effects or randomness are never folded.
_NEVER_FOLD = {"aten::rand", "aten::randn", "aten::bernoulli", "aten::native_dropout"}


def _foldable(node: torch.fx.Node, consts: dict[torch.fx.Node, torch.Tensor]) -> bool:
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return False
    if node.target._schema.name in _NEVER_FOLD or node.target._schema.is_mutable:
        return False
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return False
    inputs = node.all_input_nodes
    return bool(inputs) and all(n in consts for n in inputs)


def fold_constants(ep: ExportedProgram, *, grow: bool = False,
                   skip: frozenset = frozenset(), name_of=None) -> bool:
    """Fold in place; with ``grow`` also folds that make the file larger (ExecuTorch's
    ``constant_prop_pass``); ``skip``: operators never folded; ``name_of(i)``: the name of
    the i-th folded constant (default ``_folded_<node>``)."""
    gm = ep.graph_module
    graph = gm.graph
    consts = constant_placeholders(ep)
    changed = False
    folded = 0
    for node in list(graph.nodes):
        if not _foldable(node, consts) or node.target in skip:
            continue
        dying = [n for n in node.all_input_nodes if len(n.users) == 1]
        budget = sum(consts[n].nbytes for n in dying)
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: consts[n])
        with torch.no_grad():
            value = node.target(*args, **kwargs)
        if value.nbytes > budget and not grow:
            continue
        value = value.contiguous() if not value.is_contiguous() else value
        name = _fresh_name(ep, name_of(folded) if name_of else f"_folded_{node.name}")
        folded += 1
        placeholder = add_constant(ep, name, value, node.meta["val"], node)
        node.replace_all_uses_with(placeholder)
        graph.erase_node(node)
        consts[placeholder] = value
        for dead in dying:
            _remove_constant(ep, dead)
            consts.pop(dead, None)
        changed = True
    if changed:
        graph.lint()
        gm.recompile()
    return changed


def _fresh_name(ep: ExportedProgram, base: str) -> str:
    taken = {n.name for n in ep.graph.nodes} | set(ep.constants)
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def add_constant(ep: ExportedProgram, name: str, value: torch.Tensor, val: object,
                 source: torch.fx.Node | None = None) -> torch.fx.Node:
    """A new lifted-constant placeholder holding ``value`` (``val`` is its meta value),
    with the provenance of the node ``source`` it stands for."""
    name = _fresh_name(ep, name)
    graph = ep.graph
    specs = ep.graph_signature.input_specs
    first_user = next(
        (i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT), len(specs)
    )
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = placeholders[first_user] if first_user < len(placeholders) else None
    if anchor is not None:
        with graph.inserting_before(anchor):
            node = graph.placeholder(name)
    else:
        with graph.inserting_after(placeholders[-1] if placeholders else None):
            node = graph.placeholder(name)
    node.meta["val"] = val
    if source is not None:
        copy_provenance(source, node)
        # torch.export's rule: placeholders belong to no module (run_decompositions checks).
        node.meta.pop("nn_module_stack", None)
    specs.insert(first_user, InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), name))
    ep.constants[name] = value
    return node


def _remove_constant(ep: ExportedProgram, node: torch.fx.Node) -> None:
    specs = ep.graph_signature.input_specs
    for i, spec in enumerate(specs):
        if isinstance(spec.arg, TensorArgument) and spec.arg.name == node.name:
            target = spec.target
            del specs[i]
            if spec.kind == InputKind.PARAMETER or (
                spec.kind == InputKind.BUFFER and spec.persistent
            ):
                ep.state_dict.pop(target, None)
            else:
                ep.constants.pop(target, None)
            break
    ep.graph.erase_node(node)

