"""Make buffer (and input) mutations explicit: ``copy_(buffer, new_value)`` before the output.

After ``torch.export`` functionalizes a module, a mutated buffer shows up as an extra graph
output (``BUFFER_MUTATION``). The runtime keeps buffers in their planned memory across calls,
so the new value must be copied back into the buffer's bytes at the end of the method, which
is what ExecuTorch's emitted programs do too (ExecuTorch's
``exir.passes.insert_write_back_for_buffers_pass``). A mutation whose new value is the
placeholder itself (written in place already) needs no copy.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, OutputKind

from ..node_meta import copy_provenance
from ..pass_base import _renamed

_MUTATION_KINDS = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)


def insert_write_back(ep: ExportedProgram) -> bool:
    """Insert the ``copy_`` nodes into ``ep`` in place; whether any was needed."""
    sig = ep.graph_signature
    graph = ep.graph
    output = graph.output_node()
    outs = list(output.args[0])
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    input_by_target = {s.target: s.arg.name for s in sig.input_specs if s.target is not None}
    user_inputs = {s.arg.name for s in sig.input_specs if s.kind.name == "USER_INPUT"}
    changed = False
    for i, spec in enumerate(sig.output_specs):
        if spec.kind not in _MUTATION_KINDS:
            continue
        name = input_by_target.get(spec.target) if spec.kind == OutputKind.BUFFER_MUTATION \
            else (spec.target if spec.target in user_inputs else None)
        dest = placeholders.get(name) if name else None
        value = outs[i]
        if dest is None or not isinstance(value, torch.fx.Node) or value is dest:
            continue
        if value.target == torch.ops.aten.copy_.default and value.args[0] is dest:
            continue  # written back already (a second to_executorch of the same program)
        with graph.inserting_before(output):
            copy = graph.call_function(torch.ops.aten.copy_.default, (dest, value))
        copy.meta["val"] = dest.meta.get("val")
        copy_provenance(value, copy)
        outs[i] = copy
        changed = True
    if changed:
        output.args = (tuple(outs),)
        graph.lint()
        ep.graph_module.recompile()
    return changed


def insert_write_back_for_buffers_pass(
    ep: ExportedProgram,
) -> tuple[torch.fx.GraphModule, ExportGraphSignature]:
    """ExecuTorch's form: insert the copies into ``ep``'s graph and return it with a
    signature whose mutation outputs name the copies (``ep``'s own signature is left as it
    was)."""
    insert_write_back(ep)
    outs = ep.graph.output_node().args[0]
    sig = ep.graph_signature
    output_specs = [_renamed(spec, out) if spec.kind in _MUTATION_KINDS else spec
                    for spec, out in zip(sig.output_specs, outs)]
    return ep.graph_module, ExportGraphSignature(list(sig.input_specs), output_specs)


def mutated_placeholders(ep: ExportedProgram) -> set[str]:
    """Names of placeholders (buffers or inputs) that the method writes to."""
    sig = ep.graph_signature
    input_by_target = {s.target: s.arg.name for s in sig.input_specs if s.target is not None}
    names = set()
    for spec in sig.output_specs:
        if spec.kind == OutputKind.BUFFER_MUTATION and spec.target in input_by_target:
            names.add(input_by_target[spec.target])
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            names.add(spec.target)
    return names
