"""``RemoveGetItemPass`` (ExecuTorch's shared transform): an operator with values and indices
whose only reader takes the values becomes the operator that computes values alone --
``max_pool2d_with_indices`` -> ``max_pool2d``, ``max.dim`` -> ``amax`` -- for backends whose
kernels compute no indices. (Cortex-M keeps its own lenient variant, which skips what this
one refuses.)"""

from __future__ import annotations

import operator

import torch

from ...errors import ExportError
from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult

_A = exir_ops.edge.aten
# operator with (values, indices) -> the operator computing its values only
_VALUES_ONLY = {_A.max_pool2d_with_indices.default: _A.max_pool2d.default,
                _A.max.dim: _A.amax.default}


class RemoveGetItemPass(ExportPass):
    """Replace ``getitem(op(...), 0)`` by the values-only operator. ``max.dim`` read for
    both results is left for the backend; any other use of the indices is refused, as by
    ExecuTorch's pass."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        for node in list(graph.nodes):
            values_op = _VALUES_ONLY.get(node.target) if node.op == "call_function" else None
            if values_op is None:
                continue
            users = list(node.users)
            if node.target == _A.max.dim and len(users) == 2:
                continue
            if len(users) != 1 or users[0].target is not operator.getitem or users[0].args[1] != 0:
                raise ExportError(
                    f"RemoveGetItemPass: {node.format_node()} must be read once, for its values "
                    f"(getitem 0); it has readers {[u.format_node() for u in users]}. Only "
                    "the values can be kept when the indices are dropped")
            args = node.args
            if values_op == _A.amax.default:  # max.dim(x, dim, keepdim) -> amax(x, [dim], keepdim)
                args = (args[0], [args[1]], *args[2:])
            with graph.inserting_before(node):
                values = graph.call_function(values_op, args, node.kwargs)
            values.meta = dict(node.meta, val=node.meta["val"][0])
            users[0].replace_all_uses_with(values)
            graph.erase_node(users[0])
            graph.erase_node(node)
        graph_module.recompile()
        return PassResult(super().call(graph_module).graph_module, True)
