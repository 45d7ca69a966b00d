"""``lift_constant_tensor_pass``: tensor ``get_attr`` nodes of an ``ExportedProgram``'s graph
become buffer inputs (ExecuTorch's ``exir.program._program.lift_constant_tensor_pass``), so a
pass that introduced constants (``torch.tensor`` arguments a re-trace turned into attributes)
leaves a program the emitter reads like any other: each becomes a persistent buffer
``_lifted_tensor_constant<N>`` (N counts the buffers before it), placed before the first user
input, in graph order."""

from __future__ import annotations

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

__all__ = ["lift_constant_tensor_pass"]


def lift_constant_tensor_pass(ep: ExportedProgram) -> ExportedProgram:
    """Lift ``ep``'s tensor attributes in place; returns ``ep``."""
    graph = ep.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if not placeholders:
        return ep
    sig = ep.graph_signature
    n_buffers = len(sig.buffers)
    fake_mode = detect_fake_mode([n.meta.get("val") for n in placeholders])
    first_user = next((n for n in placeholders if n.name in sig.user_inputs), None)
    lifted: list[InputSpec] = []
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(ep.graph_module, str(node.target))
        if not isinstance(value, torch.Tensor):
            continue
        fqn = f"_lifted_tensor_constant{n_buffers + len(lifted)}"
        with graph.inserting_before(first_user):
            placeholder = graph.placeholder(fqn)
        placeholder.meta.update(node.meta)
        placeholder.meta["val"] = (fake_mode.from_tensor(value, static_shapes=True)
                                   if fake_mode is not None else value)
        placeholder.meta["val"].constant = value
        node.replace_all_uses_with(placeholder)
        graph.erase_node(node)
        lifted.append(InputSpec(InputKind.BUFFER, TensorArgument(placeholder.name), fqn, True))
        ep.state_dict[fqn] = value
    if not lifted:
        return ep
    specs: list[InputSpec] = []
    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT and lifted:
            specs.extend(lifted)
            lifted = []
        specs.append(spec)
    sig.input_specs = lifted + specs  # no user input: the constants come first
    ep.graph_module.recompile()
    return ep
