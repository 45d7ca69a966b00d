"""Edge graph -> backend ops (ExecuTorch's ``exir.passes.replace_edge_with_backend_pass``).

Python's operators on symbolic sizes (``operator.sub`` of a ``sym_size``) become the
``executorch_prim`` backend ops the runtime runs (``exir_ops.backend.executorch_prim.sub.Scalar``),
and calls of a backend namespace's operators through ``torch.ops`` become their backend
form. Edge operators stay as they are; the graph computes the same values."""

from __future__ import annotations

import torch
from torch._ops import OpOverload
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..dialects._ops import ops as exir_ops
from ..dialects.backend._ops import BACKEND_NAMESPACES
from ..dialects.edge._ops import EdgeOpOverload
from ..pass_base import retarget_calls
from .executorch_prim_ops_registry import PYTHON_TO_BACKEND_SYM_OPS


def backend_op(target: OpOverload) -> object:
    """``target``'s backend form, or ``target`` when its namespace has none."""
    if target.namespace not in BACKEND_NAMESPACES:
        return target
    name = target._schema.name.split("::")[1]
    try:
        return getattr(getattr(getattr(exir_ops.backend, target.namespace), name),
                       target._overloadname)
    except (AttributeError, RuntimeError):  # no such op, or one torch cannot trace
        return target


def _backend_target(target: object) -> object:
    if isinstance(target, EdgeOpOverload):
        return target
    if isinstance(target, OpOverload):
        return backend_op(target)
    try:
        return PYTHON_TO_BACKEND_SYM_OPS.get(target, target)
    except TypeError:  # an unhashable callable
        return target


class EdgeToBackendOpsPass(PassBase):
    """Symbolic-size arithmetic -> ``executorch_prim`` backend ops, and ``torch.ops`` calls of
    backend namespaces -> backend ops, in every nested graph."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module, retarget_calls(graph_module, _backend_target))
