"""``AddmmToLinearTransform``: ``addmm``/``mm`` whose weight is a transpose become ``linear``
on the untransposed weight, and ``view_copy``s around a linear that only restore its shape
go away (ExecuTorch's ``addmm_mm_to_linear.py``)."""

from __future__ import annotations

import torch

from ...exir.dialects._ops import ops as exir_ops
from ...exir.pass_base import ExportPass, PassResult
from ...exir.sym_util import eval_shape, eval_shape_upper_bound

_INT64_MAX_DIM = torch.iinfo(torch.int64).max - 1


def get_shape(node: torch.fx.Node) -> list[int]:
    """The node's shape at its upper bounds, or as traced when a dim is unbounded."""
    shape = node.meta["val"].shape
    upper = eval_shape_upper_bound(shape)
    if any(d >= _INT64_MAX_DIM for d in upper):
        return eval_shape(shape)
    return upper


def get_dqlinear_input(node: torch.fx.Node) -> torch.fx.Node | None:
    """The ``dequantize_per_tensor.tensor`` reached from ``node`` through view_copies only."""
    dq = _dq_target()
    while node.op != "placeholder":
        if node.op == "call_function" and dq is not None and node.target == dq:
            return node
        if node.op == "call_function" and node.target == exir_ops.edge.aten.view_copy.default:
            node = node.args[0]
        else:
            return None
    return None


def _dq_target():
    try:
        return exir_ops.edge.quantized_decomposed.dequantize_per_tensor.tensor
    except AttributeError:  # quantized_decomposed not loaded: no such nodes either
        return None


def replace_linear_view_copy_input_output(graph: torch.fx.Graph) -> torch.fx.Graph:
    """``x -> view_copy... -> linear -> view_copy -> y`` to ``x -> linear -> y`` (a linear
    takes inputs of any rank)."""
    view = exir_ops.edge.aten.view_copy.default
    for node in graph.nodes:
        if node.op != "call_function" or node.target != exir_ops.edge.aten.linear.default:
            continue
        input_node = node.args[0]
        source = get_dqlinear_input(input_node)
        if source is not None and source != input_node:
            if len(input_node.args[0].users) == 1:
                input_node.replace_all_uses_with(source)
            else:
                print(f"{input_node} has more than one user. Users: {input_node.users}")
        if len(node.users) != 1:
            continue
        user = next(iter(node.users))
        if user.op != "call_function" or user.target != view:
            continue
        out_shape = list(get_shape(node.args[0]))
        weight = node.args[1]
        if "val" not in weight.meta:
            raise ValueError(f"Val not found meta of node {weight}")
        out_shape[-1] = weight.meta["val"].shape[0]
        if out_shape == list(get_shape(user)):
            user.replace_all_uses_with(node)
    graph.eliminate_dead_code()
    return graph


def replace_addmm_mm_with_linear(graph: torch.fx.Graph) -> torch.fx.Graph:
    ops = exir_ops.edge.aten
    transposes = (ops.t_copy.default, ops.permute_copy.default)
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in (ops.mm.default, ops.addmm.default):
            continue
        with graph.inserting_after(node):
            is_addmm = node.target == ops.addmm.default
            weight_t = node.args[2] if is_addmm else node.args[1]
            if weight_t.target not in transposes:
                continue  # a standalone matmul
            args = ((node.args[1], weight_t.args[0], node.args[0]) if is_addmm
                    else (node.args[0], weight_t.args[0]))
            linear = graph.create_node("call_function", ops.linear.default, args)
            node.replace_all_uses_with(linear)
            out = linear.target(*[a.meta["val"] for a in args])
            linear.meta = node.meta
            linear.meta["val"] = out
    graph.eliminate_dead_code()
    return graph


def apply_addmm_mm_to_linear_transform(graph: torch.fx.Graph) -> torch.fx.Graph:
    return replace_linear_view_copy_input_output(replace_addmm_mm_with_linear(graph))


class AddmmToLinearTransform(ExportPass):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph_module.graph = apply_addmm_mm_to_linear_transform(graph_module.graph)
        return PassResult(graph_module, True)
