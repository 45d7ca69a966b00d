"""``ConvertDtypePass`` / ``I64toI32``: compute in another dtype inside the graph while the
program's inputs and outputs keep theirs (ExecuTorch's ``convert_dtype_pass.py``; Vulkan has no
int64, so its tests lower index-producing graphs through ``I64toI32``).

Each input of the source dtype gets a copy to the destination dtype after it, every operator
producing the source dtype produces the destination dtype instead (its ``dtype=`` argument
too), and each output of the source dtype gets a copy back before the output node.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult


class ConvertDtypePass(ExportPass):
    def __init__(self, src_dtype: torch.dtype, dst_dtype: torch.dtype,
                 _skip_dim_order: bool = False) -> None:
        super().__init__()
        self.copy_op = (exir_ops.edge.aten._to_copy.default if _skip_dim_order
                        else exir_ops.edge.dim_order_ops._to_dim_order_copy.default)
        self.src_dtype = src_dtype
        self.dst_dtype = dst_dtype

    def _is_src(self, val: Any) -> bool:
        return isinstance(val, FakeTensor) and val.dtype == self.src_dtype

    def _copy(self, graph: torch.fx.Graph, node: torch.fx.Node, dtype: torch.dtype,
              val: FakeTensor) -> torch.fx.Node:
        copy = graph.create_node("call_function", self.copy_op, (node,), {"dtype": dtype})
        copy.meta["val"] = val
        return copy

    def _convert(self, graph: torch.fx.Graph) -> None:
        # the values as they were: an output's dtype is read before its producer is converted
        before = {n: n.meta.get("val") for n in graph.nodes}
        for node in list(graph.nodes):
            val = node.meta.get("val")
            if node.op == "placeholder" and self._is_src(val):
                with graph.inserting_after(node):
                    copy = self._copy(graph, node, self.dst_dtype, val.to(self.dst_dtype))
                node.replace_all_uses_with(copy)
                copy.args = (node,)
            elif (node.op == "call_function" and node.target is not operator.getitem
                  and self._is_src(val)):
                node.meta["val"] = val.to(self.dst_dtype)
                schema = getattr(node.target, "_schema", None)
                if schema is not None and any(a.name == "dtype" for a in schema.arguments):
                    node.kwargs = {**node.kwargs, "dtype": self.dst_dtype}
            elif node.op == "output":
                vals = [before.get(a) if isinstance(a, torch.fx.Node) else None
                        for a in node.args[0]]
                outputs = list(node.args[0])
                for i, out_val in enumerate(vals):
                    if self._is_src(out_val):
                        with graph.inserting_before(node):
                            outputs[i] = self._copy(graph, outputs[i], self.src_dtype, out_val)
                node.args = (type(node.args[0])(outputs),)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self._convert(graph_module.graph)
        graph_module.recompile()
        return PassResult(graph_module, True)


class I64toI32(ConvertDtypePass):
    def __init__(self, _skip_dim_order: bool = False) -> None:
        super().__init__(torch.int64, torch.int32, _skip_dim_order)
