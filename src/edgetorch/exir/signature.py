"""What each placeholder and output of an ExportedProgram is: user input, weight, constant,
mutable buffer, user output or buffer write-back."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind


@dataclass(frozen=True)
class PlaceholderInfo:
    kind: InputKind
    fqn: str | None  # the parameter/buffer/constant name, None for user inputs
    mutable: bool  # a buffer the method writes back to


def placeholder_infos(ep: ExportedProgram) -> dict[torch.fx.Node, PlaceholderInfo]:
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    by_name = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    infos = {}
    for spec in sig.input_specs:
        node = by_name.get(getattr(spec.arg, "name", None))
        if node is None:
            continue
        fqn = spec.target if spec.kind != InputKind.USER_INPUT else None
        infos[node] = PlaceholderInfo(spec.kind, fqn, spec.kind == InputKind.BUFFER and fqn in mutated)
    return infos


def constant_value(ep: ExportedProgram, info: PlaceholderInfo) -> torch.Tensor | None:
    if info.fqn is None:
        return None
    if info.fqn in ep.state_dict:
        return ep.state_dict[info.fqn]
    if info.fqn in ep.constants:
        value = ep.constants[info.fqn]
        return value if isinstance(value, torch.Tensor) else None
    return None


def constant_placeholders(ep: ExportedProgram) -> dict[torch.fx.Node, torch.Tensor]:
    """Placeholders whose value is fixed at export: parameters, buffers never written, constants."""
    out = {}
    for node, info in placeholder_infos(ep).items():
        if info.kind == InputKind.USER_INPUT or info.mutable:
            continue
        value = constant_value(ep, info)
        if value is not None:
            out[node] = value
    return out


def user_output_indices(ep: ExportedProgram) -> list[int]:
    """Positions, among the output node's arguments, of the values the caller receives."""
    return [i for i, s in enumerate(ep.graph_signature.output_specs)
            if s.kind == OutputKind.USER_OUTPUT]
