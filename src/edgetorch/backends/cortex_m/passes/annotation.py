"""The graph clean-ups ``CortexMQuantizer`` runs before it annotates (ExecuTorch's
``CortexMPassManager.pass_list_transform_for_annotation``), on the ATen graph of
``torch.export``: spellings CMSIS-NN has no kernel for become ones it has, so the quantizer
annotates (and calibrates) what will finally run.

- ``ScalarsToAttributePass``: a float scalar operand of add/sub/mul/div becomes a constant
  tensor (an attribute), so it gets an observer like any other operand.
- ``ClampHardswishPass``: ``hardswish(x)`` reads ``clamp(x, -3)``, so the preceding op's
  observer sees the range hardswish uses (``DecomposeHardswishPass`` relies on it).
- ``DecomposeMeanPass``: ``adaptive_avg_pool2d`` to 1x1 and a spatial ``mean`` become
  ``avg_pool2d`` over the whole plane.
- ``MatmulToBmmPass``: batched ``matmul`` becomes ``bmm`` (folding leading batch dims).
- ``DeduplicateGetAttrPass``: a constant read by several ops gets one attribute per reader.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg
from torch.fx.passes.infra.pass_base import PassResult
from torchao.quantization.pt2e.utils import get_new_attr_name_with_prefix

from ....exir.pass_base import ExportPass, ProxyValue

aten = torch.ops.aten


def _first_fake(node: Node) -> torch.Tensor:
    val = node.meta["val"]
    return val[0] if isinstance(val, (list, tuple)) else val


def control_flow_submodules(gm: GraphModule) -> list[GraphModule]:
    """The branch and body graphs of ``cond`` / ``while_loop`` calls in ``gm``."""
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch.ops.higher_order.cond:
            refs = node.args[1:3]
        elif node.target is torch.ops.higher_order.while_loop:
            refs = node.args[0:2]
        else:
            continue
        for ref in refs:
            if isinstance(ref, Node) and ref.op == "get_attr":
                found.append(getattr(gm, str(ref.target)))
    return found


class ScalarsToAttributePass(ExportPass):
    targeted_ops = (aten.add.Tensor, aten.sub.Tensor, aten.rsub.Scalar, aten.mul.Tensor,
                    aten.div.Tensor, aten.div_.Tensor, aten.div.Tensor_mode)

    def _convert(self, gm: GraphModule, n: Node) -> bool:
        if n.op != "call_function" or n.target not in self.targeted_ops:
            return False
        rank = max([1] + [len(_first_fake(a).shape) for a in n.args if isinstance(a, Node)])
        out = _first_fake(n)
        modified = False
        new_args: list[Any] = []
        for arg in n.args:
            is_scalar = isinstance(arg, (int, float)) and not isinstance(arg, Node)
            if not is_scalar or (isinstance(arg, int) and not torch.is_floating_point(out)):
                new_args.append(arg)
                continue
            name = get_new_attr_name_with_prefix("_tensor_constant_")(gm)
            value = torch.tensor(float(arg), device=out.device, dtype=out.dtype)
            value = value.reshape((1,) * rank)
            gm.register_buffer(name, value)
            with gm.graph.inserting_before(n):
                attr = gm.graph.create_node("get_attr", name, (), {})
            attr.meta["val"] = n.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
            new_args.append(attr)
            modified = True
        if not modified:
            return False
        n.args = tuple(new_args)
        if n.target == aten.rsub.Scalar:  # the re-trace has no rsub of two tensors
            with gm.graph.inserting_after(n):
                sub = gm.graph.create_node("call_function", aten.sub.Tensor,
                                           (n.args[1], n.args[0]), {})
            n.replace_all_uses_with(sub)
            sub.meta["val"] = n.meta["val"]
            gm.graph.erase_node(n)
        return True

    def call(self, graph_module: GraphModule) -> PassResult:
        modified = False
        for module in [graph_module, *control_flow_submodules(graph_module)]:
            for n in list(module.graph.nodes):
                modified |= self._convert(module, n)
        if modified:
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)


class ClampHardswishPass(ExportPass):
    def call_operator(self, op, args, kwargs, meta):
        if op in (aten.hardswish.default, aten.hardswish_.default):
            args = (super().call_operator(aten.clamp.default, (args[0], -3), {}, meta),)
        return super().call_operator(op, args, kwargs, meta)


class DecomposeMeanPass(ExportPass):
    def call_operator(self, op, args, kwargs, meta):
        if op == aten.adaptive_avg_pool2d.default:
            x = args[0].to_tensor()
            new_args = (args[0], [x.shape[-2], x.shape[-1]], [1, 1], [0, 0], 0, 0)
            adaptive = aten.adaptive_avg_pool2d.default(x, *args[1:])
            pooled = aten.avg_pool2d.default(x, *new_args[1:])
            if adaptive.shape == pooled.shape:  # only a pool to 1x1 is one avg_pool2d
                return super().call_operator(aten.avg_pool2d.default, new_args, kwargs, meta)
        if op == aten.mean.dim:
            pooled = self._spatial_mean(args, kwargs, meta)
            if pooled is not None:
                return pooled
        return super().call_operator(op, args, kwargs, meta)

    def _spatial_mean(self, args, kwargs, meta):
        """A mean over both spatial dims of a static 4-D tensor: a pool over the plane."""
        if not isinstance(args[0], ProxyValue):  # a mean over a constant
            return None
        x = args[0].to_tensor()
        dims = args[1]
        if x.dim() != 4 or any(not isinstance(d, int) for d in x.shape):
            return None
        if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) for d in dims):
            return None
        if sorted(d % 4 for d in dims) != [2, 3] or kwargs.get("dtype") is not None:
            return None
        n, c, h, w = x.shape
        pooled = super().call_operator(aten.avg_pool2d.default,
                                       (args[0], [h, w], [1, 1], [0, 0], False, False), {}, meta)
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        if keepdim:
            return pooled
        return super().call_operator(aten.view.default, (pooled, [n, c]), {}, meta)


class MatmulToBmmPass(ExportPass):
    def call_operator(self, op, args, kwargs, meta):
        if op != aten.matmul.default:
            return super().call_operator(op, args, kwargs, meta)
        lhs, rhs = args[0], args[1]
        ls, rs = lhs.to_tensor().shape, rhs.to_tensor().shape
        if len(ls) == len(rs) == 3 and ls[:-2] == rs[:-2]:
            return super().call_operator(aten.bmm.default, (lhs, rhs), {}, meta)
        if len(ls) == len(rs) and len(ls) > 3 and ls[:-2] == rs[:-2]:
            m, k, n = ls[-2], ls[-1], rs[-1]
            call = super().call_operator
            lhs3 = call(aten.reshape.default, (lhs, [-1, m, k]), {}, meta)
            rhs3 = call(aten.reshape.default, (rhs, [-1, k, n]), {}, meta)
            out = call(aten.bmm.default, (lhs3, rhs3), {}, meta)
            return call(aten.reshape.default, (out, [*ls[:-2], m, n]), {}, meta)
        return super().call_operator(op, args, kwargs, meta)


class DeduplicateGetAttrPass(ExportPass):
    """torchao's constant folding can delete an attribute two get_attr nodes share; one
    node and one attribute per reader also lets each reader get its own observer."""

    @staticmethod
    def _attr(gm: GraphModule, target: str) -> Any:
        value: Any = gm
        for atom in target.split("."):
            value = getattr(value, atom)
        return value

    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.find_nodes(op="get_attr")):
            for user in list(node.users)[1:]:
                with graph.inserting_before(user):
                    copy = graph.get_attr(node.target)
                copy.meta.update(node.meta)
                user.args = map_arg(user.args, lambda a, o=node, c=copy: c if a is o else a)
                user.kwargs = map_arg(user.kwargs, lambda a, o=node, c=copy: c if a is o else a)
                modified = True
        seen: set[str] = set()
        for node in graph.find_nodes(op="get_attr"):
            if node.target not in seen:
                seen.add(node.target)
                continue
            value = self._attr(graph_module, node.target)
            name = get_new_attr_name_with_prefix(f"_deduplicated_get_attr_{node.name}_")(
                graph_module)
            if isinstance(value, torch.nn.Parameter):
                graph_module.register_parameter(name, value)
            elif isinstance(value, torch.Tensor):
                graph_module.register_buffer(name, value)
            else:
                setattr(graph_module, name, value)
            node.target = name
            modified = True
        if modified:
            graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)
