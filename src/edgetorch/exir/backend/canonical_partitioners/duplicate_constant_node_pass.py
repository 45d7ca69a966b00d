"""``duplicate_constant_node``: give every user of a weight placeholder but the first its own
copy, so each partition owns the weights it reads (ExecuTorch's pass of this name, which its
``to_backend`` runs on weights shared across partitions unless they are marked ``no_copy``)."""

from __future__ import annotations

import copy
import logging

import torch
from torch._export.utils import get_buffer, get_lifted_tensor_constant, get_param
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

logger = logging.getLogger(__name__)


def _weight(ep: ExportedProgram, node: torch.fx.Node) -> torch.Tensor | None:
    for get in (get_param, get_buffer, get_lifted_tensor_constant):
        value = get(ep, node)
        if value is not None:
            return value
    return None


def duplicate_constant_node(ep: ExportedProgram, candidate_node: str) -> set[str]:
    """Copies ``<name>_copy_0``, ``_copy_1``... of placeholder ``candidate_node``, placed before
    it, each read by one of its users after the first; returns the copies' names. A copy's
    signature entry keeps the original's target."""
    node = next((n for n in ep.graph.nodes if n.op == "placeholder"
                 and n.name == candidate_node), None)
    if node is None:
        logger.info("no constant node to be copied")
        return set()
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    old_specs = list(ep.graph_signature.input_specs)
    new_specs: list[InputSpec] = []
    copied: set[str] = set()
    for ph, spec in zip(placeholders, old_specs):
        kept = copy.deepcopy(spec)
        if ph is node:
            data = _weight(ep, ph)
            if data is None:
                raise RuntimeError("placeholder node for non-params, non-buffer, and non-tensor "
                                   f"constants should not be tagged: {ph} ")
            users = list(ph.users)
            for i in range(1, len(users)):
                name = f"{ph.name}_copy_{i - 1}"
                with ep.graph.inserting_before(ph):
                    dup = ep.graph.placeholder(name)
                copied.add(name)
                logger.info("Copying constant nodes %s and creating %s", ph.name, name)
                dup.meta.update(ph.meta)
                user = users[i]
                user.args = tuple(dup if a is ph else a for a in user.args)
                user.kwargs = {k: dup if v is ph else v for k, v in user.kwargs.items()}
                store = (ep.constants if spec.kind == InputKind.CONSTANT_TENSOR or (
                    spec.kind == InputKind.BUFFER and spec.persistent is False)
                    else ep.state_dict)
                store[name] = copy.deepcopy(data)
                new_specs.append(InputSpec(kind=spec.kind, arg=TensorArgument(name=name),
                                           target=spec.target, persistent=spec.persistent))
        new_specs.append(kept)  # the original comes after its copies, as in the graph
    ep.graph_signature.input_specs = new_specs
    ep.graph_module.recompile()
    return copied


def maybe_duplicate_constant_nodes(ep: ExportedProgram, tag: str) -> None:
    """Copy each weight tagged ``tag`` that nodes outside the partition read too, then tag
    the weight and its copies with their users' tag (None when a user is not delegated)."""
    candidates = set()
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.meta.get("delegation_tag", "") != tag:
            continue
        if _weight(ep, node) is None:
            continue  # a tagged user input: to_backend refuses it with a typed error
        for user in node.users:
            other = user.meta.get("delegation_tag")
            if other != tag:
                if node.meta.get("no_copy", False):
                    raise RuntimeError(f"constant data node ({node}) is tagged with ({tag}) but "
                                       f"has user ({user}) which has tag ({other})")
                candidates.add(node.name)
    copies: set[str] = set()
    for name in candidates:
        copies |= duplicate_constant_node(ep, name)
    retag = candidates | copies
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in retag:
            tags = {u.meta.get("delegation_tag") for u in node.users}
            if len(tags) == 1:
                node.meta["delegation_tag"] = tags.pop()
