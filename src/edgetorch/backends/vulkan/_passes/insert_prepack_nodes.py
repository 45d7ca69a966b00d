"""``insert_prepack_nodes``: an ``et_vk.prepack`` after each weight whose user wants a GPU
tensor (the weight is uploaded once, at load). Operators that prepack their own weights
(convolution, linear, embedding...) read the weight directly, unless it is their primary
input. Weights are marked ``etvk_tensorref`` (a TensorRef in the C++ graph)."""

from __future__ import annotations

from copy import deepcopy

from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from ..op_registry import handles_own_prepacking
from ..utils import is_param_node


def _primary_arg_index(target: object) -> int:
    if target == exir_ops.edge.aten.embedding.default:
        return 1  # embedding(weight, indices): the indices
    if getattr(target, "__name__", "") == "et_vk.embedding_q4gsw.default":
        return 3  # (weight, scales, group_size, indices)
    return 0


def insert_prepack_nodes(program: ExportedProgram) -> ExportedProgram:
    graph = program.graph_module.graph
    for node in graph.nodes:
        if not is_param_node(program, node):
            continue
        node.meta["etvk_tensorref"] = True
        users = [u for u in node.users if u.op == "call_function" and (
            not handles_own_prepacking(u.target)
            or (node in u.args and u.args.index(node) == _primary_arg_index(u.target)))]
        if not users:
            continue
        replace_all = len(users) == len(node.users)
        with graph.inserting_after(node):
            prepack = graph.create_node("call_function", exir_ops.edge.et_vk.prepack.default,
                                        (node,))
            # A mutable buffer is constant for planning's sake: it keeps its own memory.
            if not node.meta["spec"].const:
                node.meta["spec"].const = True
            prepack.meta["val"] = node.meta["val"]
            prepack.meta["spec"] = deepcopy(node.meta["spec"])
            prepack.meta["spec"].mem_obj_id = -1  # a dedicated memory object
            if replace_all:
                node.replace_all_uses_with(
                    prepack, lambda user, p=prepack: user != p and user.op != "output")
            else:
                for user in users:
                    user.replace_input_with(node, prepack)
    graph.eliminate_dead_code()
    return program
