"""Helpers of ExecuTorch's ``backends.xnnpack.utils.utils`` that backend tests use."""

from __future__ import annotations

import torch
from torch._export.utils import (
    get_buffer,
    get_lifted_tensor_constant,
    get_param,
    is_buffer,
    is_lifted_tensor_constant,
    is_param,
)
from torch.export import ExportedProgram

from ....errors import InvalidArgumentError


def get_param_tensor(exp_prog: ExportedProgram, node: torch.fx.Node | None
                     ) -> torch.Tensor | None:
    """The tensor a weight, buffer, lifted constant or ``get_attr`` node stands for."""
    if node is None:
        return None
    if is_param(exp_prog, node):
        return get_param(exp_prog, node)
    if is_buffer(exp_prog, node):
        return get_buffer(exp_prog, node)
    if is_lifted_tensor_constant(exp_prog, node):
        return get_lifted_tensor_constant(exp_prog, node)
    if node.op == "get_attr":
        owner = node.graph.owning_module or exp_prog.graph_module
        return getattr(owner, node.target)  # type: ignore[arg-type]
    raise InvalidArgumentError(f"%{node.name} ({node.op}) is not a weight, buffer, constant or "
                               "get_attr node")
