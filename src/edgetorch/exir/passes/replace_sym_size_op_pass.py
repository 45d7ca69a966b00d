"""Symbolic-size calls by packet -> by overload (ExecuTorch's
``exir.passes.replace_sym_size_op_pass``): a graph traced through ``make_fx`` may call
``aten.sym_size`` (the packet); the emitter and the verifier know the overload
``aten.sym_size.int`` (and ``sym_stride.int``, ``sym_numel.default``)."""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..pass_base import retarget_calls

REPLACEMENTS = {
    torch.ops.aten.sym_size: torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_stride: torch.ops.aten.sym_stride.int,
    torch.ops.aten.sym_numel: torch.ops.aten.sym_numel.default,
}


class ReplaceSymSizeOpPass(PassBase):
    """Retarget calls of the ``sym_size``/``sym_stride``/``sym_numel`` packets to their
    overloads, in every nested graph."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module,
                          retarget_calls(graph_module, lambda t: REPLACEMENTS.get(t, t)))
