"""Constants in a layout the runtime plans (ExecuTorch's
``exir.passes.convert_constant_dim_order_pass``).

A ``.pte`` tensor's layout is a dim order, and the runtime's kernels take contiguous or
channels-last ones; a constant or persistent buffer captured with other strides (a transposed
weight, a permuted buffer, an expanded one) is made contiguous, its values unchanged. Works in
place on an exported program with lifted constants, before ``to_edge``."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ...errors import ExportError


def needs_contiguous_copy(tensor: torch.Tensor) -> bool:
    """Neither contiguous nor channels-last."""
    return not (tensor.is_contiguous()
                or tensor.is_contiguous(memory_format=torch.channels_last))


def _placeholder_of(ep: ExportedProgram, target: str, kind: InputKind) -> torch.fx.Node:
    spec = next((s for s in ep.graph_signature.input_specs
                 if s.kind == kind and s.target == target), None)
    node = None if spec is None else next(
        (n for n in ep.graph.nodes if n.op == "placeholder" and n.name == spec.arg.name), None)
    if node is None:
        raise ExportError(f"lifted {kind.name.lower()} {target!r} has no graph input; "
                          "run the pass on a program torch.export made (lifted constants)")
    return node


def _update_placeholder(ep: ExportedProgram, target: str, kind: InputKind) -> None:
    # The placeholder's value is what a re-trace (ExportPass) takes as the input's layout.
    node = _placeholder_of(ep, target, kind)
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        node.meta["val"] = val.contiguous()


def convert_constant_dim_order_pass(exported_program: ExportedProgram) -> ExportedProgram:
    """Make every constant tensor and persistent buffer of ``exported_program`` whose layout
    is neither contiguous nor channels-last contiguous; returns the (same) program."""
    ep = exported_program
    for name, const in list(ep.constants.items()):
        if isinstance(const, torch.Tensor) and needs_contiguous_copy(const):
            ep.constants[name] = const.contiguous()
            _update_placeholder(ep, name, InputKind.CONSTANT_TENSOR)
    non_persistent = set(ep.graph_signature.non_persistent_buffers)
    for name, buffer in list(ep.named_buffers()):
        # non-persistent buffers live in ``constants`` (handled above), not the state dict
        if name not in non_persistent and needs_contiguous_copy(buffer):
            ep.state_dict[name] = buffer.contiguous()
            _update_placeholder(ep, name, InputKind.BUFFER)
    return ep
