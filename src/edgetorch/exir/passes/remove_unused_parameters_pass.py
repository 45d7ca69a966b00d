"""Drop parameters nothing reads (ExecuTorch's ``remove_unused_parameters_pass``).

A PT2E-converted model keeps its float weights as parameters next to the int8 copies its
graph uses; without this they would be written to the ``.pte`` as dead constants.
"""

from __future__ import annotations

import copy

from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind


def remove_unused_parameters_pass(ep: ExportedProgram) -> ExportedProgram:
    """Remove the unused parameters of ``ep`` from its graph, signature and state dict
    (in place, as ExecuTorch's pass does); returns ``ep``."""
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    unused = [s for s in ep.graph_signature.input_specs
              if s.kind == InputKind.PARAMETER and not placeholders[s.arg.name].users]
    if not unused:
        return ep
    signature = copy.deepcopy(ep.graph_signature)
    for spec in unused:
        signature.input_specs.remove(spec)
        ep._state_dict.pop(spec.target, None)
        ep.graph.erase_node(placeholders[spec.arg.name])
    ep._graph_signature = signature
    ep.graph_module.recompile()
    return ep
