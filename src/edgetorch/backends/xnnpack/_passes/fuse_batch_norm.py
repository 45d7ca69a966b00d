"""``FuseBatchNormPass``: a convolution or linear whose only user is an inference batch norm
takes the norm into its weight and bias (torch's ``fuse_conv_bn_weights`` /
``fuse_linear_bn_weights``, as ExecuTorch's XNNPACK pass of this name, which the Vulkan
preprocess runs too). The fused weights are new parameters placed before the old weight; the
old weights and norm statistics go when nothing else reads them."""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import PassResult
from ...transforms.utils import (
    create_constant_placeholder,
    delete_constant_placeholder,
    get_param_tensor,
    get_tensor_name,
    is_param_node,
)
from .xnnpack_pass import XNNPACKPass

_A = exir_ops.edge.aten
_BATCH_NORMS = (_A.native_batch_norm.default, _A._native_batch_norm_legit_no_training.default)


class FuseBatchNormPass(XNNPACKPass):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        to_delete: set = set()
        for node in graph.nodes:
            is_conv = node.target == _A.convolution.default
            if not (is_conv or node.target == _A.linear.default) or len(node.users) != 1:
                continue
            bn = next(iter(node.users))
            if bn.target not in _BATCH_NORMS or not self.can_fuse(node, bn,
                                                                   self.exported_program):
                continue
            self._fuse(graph_module, node, bn, is_conv, to_delete)
        if to_delete:
            graph.eliminate_dead_code()
            for n in to_delete:
                if n is not None and not n.users:
                    delete_constant_placeholder(self.exported_program, n)
        graph_module.recompile()
        return PassResult(super().call(graph_module).graph_module, True)

    @staticmethod
    def can_fuse(node: torch.fx.Node, bn: torch.fx.Node, program: ExportedProgram,
                 why=None) -> bool:
        """The norm's only uses take its output, both weights are parameters, and a
        convolution is 1-D or 2-D."""
        def no(reason: str) -> bool:
            if why:
                why(reason)
            return False

        if node.op != "call_function":
            return False
        if node.target not in (_A.convolution.default, _A.linear.default):
            return no("Input node must be a convolution or linear op.")
        if any(not (u.target == operator.getitem and u.args[1] == 0) for u in bn.users):
            return no("Batch norm users must only access the output tensor.")
        w, bn_w = node.args[1], bn.args[1]
        if not isinstance(w, torch.fx.Node) or not isinstance(bn_w, torch.fx.Node):
            return no("Input node weights must be parameters.")
        if not all(is_param_node(program, n) for n in {w, bn_w}):
            return no("Node weights must be static.")
        if node.target == _A.convolution.default:
            x = node.args[0]
            if not isinstance(x, torch.fx.Node) or "val" not in x.meta \
                    or len(x.meta["val"].shape) not in (3, 4):
                return no("Convolution input must be rank 3 or 4.")
        return True

    def _fuse(self, gm: torch.fx.GraphModule, node: torch.fx.Node, bn: torch.fx.Node,
              is_conv: bool, to_delete: set) -> None:
        ep, graph = self.exported_program, gm.graph
        has_bias = True if is_conv else len(node.args) == 3
        weight = get_param_tensor(ep, node.args[1])
        weight_name = get_tensor_name(ep, node.args[1])
        bias = get_param_tensor(ep, node.args[2]) if has_bias else None
        bias_name = get_tensor_name(ep, node.args[2]) if has_bias else ""
        stats = [get_param_tensor(ep, a) for a in bn.args[1:5]]  # gamma, beta, mean, var
        eps = bn.args[-1]
        fuse_args = (weight, bias, stats[2], stats[3], eps, stats[0], stats[1])
        if is_conv:
            fused_w, fused_b = fuse_conv_bn_weights(*fuse_args, node.args[6])
        else:
            fused_w, fused_b = fuse_linear_bn_weights(*fuse_args)
        w_name = (weight_name + "_fused_bn").replace(".", "_")
        b_name = ((bias_name or weight_name + "_bias") + "_fused_bn").replace(".", "_")
        with graph.inserting_before(node.args[1]):
            w_node = create_constant_placeholder(ep, graph, w_name, InputKind.PARAMETER, fused_w)
            b_node = None if fused_b is None else create_constant_placeholder(
                ep, graph, b_name, InputKind.PARAMETER, fused_b)
            args = list(node.args)
            args[1] = w_node
            if has_bias:
                args[2] = b_node
            elif b_node is not None:
                args.append(b_node)
            node.args = tuple(args)
            for user in bn.users.copy():
                user.replace_all_uses_with(node)
                graph.erase_node(user)
            graph.erase_node(bn)
            to_delete.update(node.args[1:3] + bn.args[1:5])
