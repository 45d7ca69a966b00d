"""``LegalizePortableDimOrderPass``: a contiguous ``_to_dim_order_copy`` before the operators
whose portable kernels accept only the default dim order on their first input.

ExecuTorch 1.5.1's portable ``mean.out``, ``sum.IntList_out``, ``avg_pool2d.out``,
``_adaptive_avg_pool2d.out`` and ``expand_copy.out`` refuse a channels-last input
(``InvalidArgument``, 0x12), and its ``to_executorch`` inserts this copy after the user's passes.
edgetorch's kernels take any dim order, but its ``.pte`` files must run in ExecuTorch too, so
``to_executorch`` runs the pass as well (only when some such input is not contiguous, so other
programs are not re-traced).
"""

from __future__ import annotations

import torch

from .. import ops as _dim_order_ops  # noqa: F401  (defines dim_order_ops::*)
from ..dialects._ops import ops as exir_ops
from ..pass_base import ExportPass, NodeMetadata, ProxyValue

_COPY = exir_ops.edge.dim_order_ops._to_dim_order_copy.default
TARGETS = frozenset({
    exir_ops.edge.aten._adaptive_avg_pool2d.default,
    exir_ops.edge.aten.avg_pool2d.default,
    exir_ops.edge.aten.expand_copy.default,
    exir_ops.edge.aten.mean.dim,
    exir_ops.edge.aten.sum.dim_IntList,
})


def _non_default(val: object) -> bool:
    if not isinstance(val, torch.Tensor):
        return False
    # A symbolic size or stride (dynamic shapes, e.g. an LLM's sequence length) has no settled
    # dim order, and asking for one guards on data-dependent values: left as it is (edgetorch's
    # kernels take any dim order).
    if not all(isinstance(n, int) for n in (*val.shape, *val.stride())):
        return False
    return tuple(int(d) for d in val.dim_order()) != tuple(range(val.dim()))


def _symbolic(val: object) -> bool:
    return isinstance(val, torch.Tensor) and \
        not all(isinstance(n, int) for n in (*val.shape, *val.stride()))


def needs_legalization(graph_module: torch.fx.GraphModule) -> bool:
    """Whether some target operator reads a tensor that is not in the default dim order.

    Graphs with symbolic shapes are left alone: the pass re-traces the whole graph, which
    fails on data-dependent sizes (an LLM's KV-cache positions); those programs keep their
    dim orders as before (a known gap: ExecuTorch inserts the copy there too)."""
    if any(_symbolic(node.meta.get("val")) for node in graph_module.graph.nodes):
        return False
    return any(node.op == "call_function" and node.target in TARGETS and node.args
               and isinstance(node.args[0], torch.fx.Node)
               and _non_default(node.args[0].meta.get("val"))
               for node in graph_module.graph.nodes)


class LegalizePortableDimOrderPass(ExportPass):
    def call_operator(self, op, args, kwargs, meta):  # type: ignore[no-untyped-def]
        if op not in TARGETS:
            return super().call_operator(op, args, kwargs, meta)
        first = args[0]
        if isinstance(first, ProxyValue) and first.is_tensor():
            value, copy_meta = first.to_tensor(), NodeMetadata(first.node.meta)
        elif isinstance(first, torch.Tensor):
            value, copy_meta = first, meta.copy()
        else:
            return super().call_operator(op, args, kwargs, meta)
        if not _non_default(value):
            return super().call_operator(op, args, kwargs, meta)
        contiguous = super().call_operator(_COPY, (first,),
                                           {"dim_order": list(range(value.dim()))}, copy_meta)
        return super().call_operator(op, (contiguous, *args[1:]), kwargs, meta)
