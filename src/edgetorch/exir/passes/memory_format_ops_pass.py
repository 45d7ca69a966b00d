"""Layout changes as dim orders (ExecuTorch's ``exir.passes.memory_format_ops_pass``).

ExecuTorch's Edge dialect states a copy's layout as a dim order, not a ``torch.memory_format``:
``_to_copy``/``clone`` become ``dim_order_ops._to_dim_order_copy``/``_clone_dim_order``
(``MemoryFormatOpsPass``, run by ``to_edge`` unless ``_skip_dim_order``), and
``DimOrderOpsRevertPass`` turns them back. An ATen call gives an ATen call and an Edge call an
Edge call."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassResult

from .. import ops as _ops  # noqa: F401  (defines dim_order_ops)
from ..dialects._ops import ops as exir_ops
from ..dialects.edge._ops import EdgeOpOverload
from ..dim_order_utils import get_memory_format
from ..pass_base import ExportPass
from ..tensor import dim_order_of
from .rewrite import rewrite

# memory-format op -> dim-order op (ExecuTorch's DimOrderOpsMap)
DIM_ORDER_OPS = {
    torch.ops.aten._to_copy.default: torch.ops.dim_order_ops._to_dim_order_copy.default,
    torch.ops.aten.clone.default: torch.ops.dim_order_ops._clone_dim_order.default,
}
MEMORY_FORMAT_OPS = {v: k for k, v in DIM_ORDER_OPS.items()}


def _in_dialect_of(target: object, op: torch._ops.OpOverload) -> object:
    """``op``, as an Edge op when ``target`` is one."""
    if not isinstance(target, EdgeOpOverload):
        return op
    name = op._schema.name.split("::")[1]
    return getattr(getattr(getattr(exir_ops.edge, op.namespace), name), op._overloadname)


def dim_order_kwarg(node: torch.fx.Node, memory_format: object) -> list[int] | None:
    """ExecuTorch's choice: an explicit format's dim order (channels-last is [0, 2, 3, 1]
    whatever the sizes), or for ``preserve_format`` the input's own
    (``Tensor.dim_order()``); always a list, [] for a 0-d tensor."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    if memory_format is torch.channels_last and val.dim() == 4:
        return [0, 2, 3, 1]
    if memory_format is torch.contiguous_format:
        return list(range(val.dim()))
    src = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], torch.fx.Node) \
        else None
    if memory_format in (None, torch.preserve_format) and isinstance(src, torch.Tensor):
        try:
            order = [int(d) for d in src.dim_order()]
        except RuntimeError:  # strides torch cannot order (overlapping)
            order = []
        # the two layouts the runtime plans (other orders: the output's, as planned)
        if order in (list(range(val.dim())), [0, 2, 3, 1]):
            return order
    return list(dim_order_of(val))


def to_dim_order_op(node: torch.fx.Node) -> bool:
    kwargs = dict(node.kwargs)
    kwargs["dim_order"] = dim_order_kwarg(node, kwargs.pop("memory_format", None))
    node.target = _in_dialect_of(node.target, DIM_ORDER_OPS[node.target])
    node.kwargs = kwargs
    return True


def to_memory_format_op(node: torch.fx.Node) -> bool:
    kwargs = dict(node.kwargs)
    val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    rank = val.dim() if isinstance(val, torch.Tensor) else 0
    kwargs["memory_format"] = get_memory_format(kwargs.pop("dim_order", list(range(rank))))
    node.target = _in_dialect_of(node.target, MEMORY_FORMAT_OPS[node.target])
    node.kwargs = kwargs
    return True


def layout_ops_to_dim_order_ops(ep: ExportedProgram) -> bool:
    """``to_edge``'s form: ``_to_copy``/``clone`` -> ``_to_dim_order_copy``/``_clone_dim_order``."""
    return rewrite(ep.graph_module, dict.fromkeys(DIM_ORDER_OPS, to_dim_order_op))


class MemoryFormatOpsPass(ExportPass):
    """``_to_copy``/``clone`` (memory format) -> ``_to_dim_order_copy``/``_clone_dim_order``
    (dim order: the format's, or for ``preserve_format`` the input's)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module,
                          rewrite(graph_module, dict.fromkeys(DIM_ORDER_OPS, to_dim_order_op)))


class DimOrderOpsRevertPass(ExportPass):
    """``_to_dim_order_copy``/``_clone_dim_order`` -> ``_to_copy``/``clone`` with the memory
    format of their dim order (contiguous when none is given)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module,
                          rewrite(graph_module,
                                  dict.fromkeys(MEMORY_FORMAT_OPS, to_memory_format_op)))
