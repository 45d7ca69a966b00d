"""Make buffer (and input) mutations explicit: ``copy_(buffer, new_value)`` before the output.

After ``torch.export`` functionalizes a module, a mutated buffer shows up as an extra graph
output (``BUFFER_MUTATION``). The runtime keeps buffers in their planned memory across calls,
so the new value must be copied back into the buffer's bytes at the end of the method, which
is what ExecuTorch's emitted programs do too.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from ..node_meta import copy_provenance

_MUTATION_KINDS = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)


def insert_write_back(ep: ExportedProgram) -> bool:
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
