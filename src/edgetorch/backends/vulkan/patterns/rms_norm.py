"""RMSNorm as one ``et_vk.rms_norm``: the decomposed form Llama's RMSNorm exports to,

    mean(x*x or x**2, dim=[-1], keepdim=True) + eps -> rsqrt -> x * rstd -> * weight

with dtype casts (``_to_copy``) allowed anywhere around the values; the anchor is the final
multiplication by the weight."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from ...transforms.utils import get_param_tensor, is_param_node
from .pattern_registry import PatternMatch, register_pattern_detector, register_pattern_replacement

_A = exir_ops.edge.aten
_CAST_OPS = {_A._to_copy.default, _A.to.dtype}


def _skip_casts(node: torch.fx.Node) -> torch.fx.Node:
    while node.target in _CAST_OPS and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node


def _is(node: object, target: object) -> bool:
    return isinstance(node, torch.fx.Node) and node.target == target


class RmsNormMatch(PatternMatch):
    def __init__(self, final_mul: torch.fx.Node) -> None:  # noqa: C901
        self.anchor_node = final_mul
        self.input_nodes, self.output_nodes = [], [final_mul]
        self.match_found = False
        self.all_nodes = [final_mul]
        self.eps_node = None
        norm_mul, self.weight_node = self._norm_mul_and_weight(final_mul)
        if norm_mul is None:
            return
        self.all_nodes.append(norm_mul)
        rsqrt, x_for_norm = self._rsqrt_and_input(norm_mul)
        if rsqrt is None:
            return
        self.all_nodes.append(rsqrt)
        add = rsqrt.args[0] if rsqrt.args and isinstance(rsqrt.args[0], torch.fx.Node) else None
        if add is None or add.target != _A.add.Tensor:
            return
        self.all_nodes.append(add)
        mean = None
        for arg in add.args[:2]:
            if _is(arg, _A.mean.dim):
                mean = arg
            else:
                self.eps_node = arg
        if mean is None or self.eps_node is None:
            return
        self.all_nodes.append(mean)
        if len(mean.args) < 3 or mean.args[1] != [-1] or not mean.args[2]:
            return
        sq = mean.args[0]
        if not isinstance(sq, torch.fx.Node):
            return
        self.all_nodes.append(sq)
        x_f32 = _skip_casts(x_for_norm) if isinstance(x_for_norm, torch.fx.Node) else x_for_norm
        if sq.target == _A.mul.Tensor:
            if sq.args[0] != sq.args[1]:
                return
        elif sq.target == _A.pow.Tensor_Scalar:
            if sq.args[1] not in (2, 2.0):
                return
        else:
            return
        sq_in = sq.args[0]
        if not isinstance(sq_in, torch.fx.Node) or (_skip_casts(sq_in) != x_f32
                                                    and sq_in != x_for_norm):
            return
        # the fused op reads the tensor before any upcast
        self.input_node = x_f32
        cast = x_for_norm
        while isinstance(cast, torch.fx.Node) and cast.target in _CAST_OPS \
                and cast not in self.all_nodes:
            self.all_nodes.append(cast)
            cast = cast.args[0] if cast.args else cast
        self.match_found = True

    @staticmethod
    def _has_rsqrt_arg(mul: torch.fx.Node) -> bool:
        return any(isinstance(a, torch.fx.Node) and _skip_casts(a).target == _A.rsqrt.default
                   for a in mul.args[:2])

    def _norm_mul_and_weight(self, final_mul: torch.fx.Node):
        """``(x * rstd, weight)`` of ``final_mul``, casts looked through."""
        if len(final_mul.args) < 2:
            return None, None
        a, b = final_mul.args[0], final_mul.args[1]
        for norm, weight in ((a, b), (b, a)):
            if not isinstance(norm, torch.fx.Node):
                continue
            n = _skip_casts(norm)
            if n.target == _A.mul.Tensor and self._has_rsqrt_arg(n):
                return n, weight
        return None, None

    @staticmethod
    def _rsqrt_and_input(norm_mul: torch.fx.Node):
        if len(norm_mul.args) < 2:
            return None, None
        a, b = norm_mul.args[0], norm_mul.args[1]
        for rsqrt, x in ((a, b), (b, a)):
            if isinstance(rsqrt, torch.fx.Node) and _skip_casts(rsqrt).target == \
                    _A.rsqrt.default:
                return _skip_casts(rsqrt), x
        return None, None


@register_pattern_detector("rms_norm")
def find_rms_norm_patterns(node: torch.fx.Node) -> RmsNormMatch | None:
    if node.target != _A.mul.Tensor:
        return None
    match = RmsNormMatch(node)
    return match if match.match_found else None


def _eps_value(ep: ExportedProgram, eps: object) -> float:
    """The epsilon: a literal, a lifted constant's data, or a node's known value."""
    if isinstance(eps, (int, float)):
        return float(eps)
    if isinstance(eps, torch.fx.Node) and is_param_node(ep, eps):
        return float(get_param_tensor(ep, eps).item())
    if isinstance(eps, torch.fx.Node) and "val" in eps.meta:
        val = eps.meta["val"]
        val = getattr(val, "constant", None) if isinstance(val, FakeTensor) else val
        if isinstance(val, torch.Tensor):
            return float(val.item())
        if isinstance(val, (int, float)):
            return float(val)
    raise ValueError(f"Cannot extract epsilon value from {eps}")


@register_pattern_replacement("rms_norm")
def replace_rms_norm_with_fused_op(ep: ExportedProgram, graph_module: torch.fx.GraphModule,
                                   match: RmsNormMatch) -> None:
    eps = _eps_value(ep, match.eps_node)
    with graph_module.graph.inserting_before(match.anchor_node):
        fused = graph_module.graph.create_node(
            "call_function", exir_ops.edge.et_vk.rms_norm.default,
            args=(match.input_node, match.weight_node, eps))
    fused.meta["val"] = match.anchor_node.meta["val"]
    match.anchor_node.replace_all_uses_with(fused)
