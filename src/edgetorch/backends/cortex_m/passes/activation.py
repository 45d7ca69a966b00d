"""Clamp-like activations on quantized tensors: fused into the producing op's output range
(``ActivationFusionPass``), or, where that is impossible, an integer ``clamp``
(``QuantizedClampActivationPass``). ExecuTorch's two passes."""

from __future__ import annotations

import logging

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.pass_base import PassResult

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass
from .graph_utils import fake
from .lowering import quantize_value
from .qparams import QuantArgs, get_output_qparams

logger = logging.getLogger(__name__)
aten = exir_ops.edge.aten


def _scalar(arg: object) -> float | None:
    if arg is None:
        return None
    if isinstance(arg, (int, float)):
        return float(arg)
    if isinstance(arg, Node):
        if arg.op == "call_function" and arg.target in (aten.full_like.default,
                                                        aten.full.default):
            return _scalar(arg.args[1] if len(arg.args) > 1 else None)
        val = arg.meta.get("val")
        return None if val is None else _scalar(val)
    if isinstance(arg, torch.Tensor) and arg.numel() == 1:
        return float(arg.item())
    return None


def activation_bounds(node: Node) -> tuple[float | None, float | None] | None:
    t, a = node.target, node.args
    if t in (aten.relu.default, aten.relu_.default):
        lo, hi = 0.0, None
    elif t == aten.hardsigmoid.default:
        lo, hi = 0.0, 1.0
    elif t in (aten.hardtanh.default, aten.hardtanh_.default):
        lo, hi = _scalar(a[1]), _scalar(a[2])
    elif t in (aten.clamp.default, aten.clamp.Tensor):
        lo = _scalar(a[1]) if len(a) > 1 else None
        hi = _scalar(a[2]) if len(a) > 2 else None
    else:
        return None
    if (len(a) > 1 and lo is None and a[1] is not None) or \
            (len(a) > 2 and hi is None and a[2] is not None):
        return None  # a bound that is no compile-time scalar
    return lo, hi


class ActivationFusionPass(ExportPass):
    TARGETS = {aten.relu.default, aten.hardtanh.default, aten.hardsigmoid.default,
               aten.clamp.default}
    MAX_POOL = {aten.max_pool2d.default, aten.max_pool2d_with_indices.default}
    FUSE_INTO = {aten.linear.default, aten.convolution.default, aten.add.Tensor,
                 aten.sub.Tensor} | MAX_POOL

    def _qparams(self, node: Node, producer: Node) -> dict | None:
        if "input_qparams" not in producer.meta or "output_qparams" not in node.meta:
            logger.warning("Cannot fuse activation for %s->%s as the pattern wasn't quantized "
                           "properly.", producer.name, node.name)
            return None
        q = node.meta["output_qparams"][0]._asdict()
        if not isinstance(q["scale"], float) or not isinstance(q["zp"], int):
            return None
        bounds = activation_bounds(node)
        if bounds is None:
            return None
        lo = quantize_value(bounds[0], q["scale"], q["zp"], q["qmin"], q["qmax"]) \
            if bounds[0] is not None else q["qmin"]
        hi = quantize_value(bounds[1], q["scale"], q["zp"], q["qmin"], q["qmax"]) \
            if bounds[1] is not None else q["qmax"]
        if producer.target in self.MAX_POOL:
            if node.target == aten.hardsigmoid.default:
                return None  # max pooling keeps its input's qparams
            q["qmin"], q["qmax"] = int(lo), int(hi)
            return q
        if q["qmin"] != lo or q["qmax"] != hi:
            # the range would hold values the activation can never produce: bad qparams
            logger.warning("Cannot fuse activation %s: its bounds do not span the output "
                           "range.", node.name)
            return None
        return q

    def call(self, graph_module: GraphModule) -> PassResult:
        erase = []
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or node.target not in self.TARGETS:
                continue
            producer = node.args[0]
            if producer.op != "call_function" or producer.target not in self.FUSE_INTO \
                    or len(producer.users) > 1 \
                    or producer.meta.get("custom", {}).get("cortex_m", {}).get(
                        "skip_quantized_max_pool2d", False):
                continue
            q = self._qparams(node, producer)
            if q is None:
                continue
            if node.target == aten.hardsigmoid.default:
                # hardsigmoid(x) = clamp(x/6 + 1/2, 0, 1): a quantization with scale 6s and
                # zero point zp + 1/(2s)
                zp = q["zp"] + round(1 / (2 * q["scale"]))
                q["scale"] *= 6
                q["zp"] = max(q["qmin"], min(q["qmax"], zp))
            producer.meta["output_qparams"][0] = QuantArgs(**q)
            node.replace_all_uses_with(producer)
            erase.append(node)
        for node in erase:
            graph_module.graph.erase_node(node)
        if erase:
            graph_module.recompile()
        return PassResult(graph_module, bool(erase))


class QuantizedClampActivationPass(ExportPass):
    TARGETS = {aten.relu.default, aten.relu_.default, aten.hardtanh.default,
               aten.hardtanh_.default, aten.clamp.default, aten.clamp.Tensor}

    def call(self, graph_module: GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or node.target not in self.TARGETS:
                continue
            x = node.args[0] if node.args else None
            if not isinstance(x, Node) or fake(x).dtype != torch.int8:
                continue
            try:
                q = get_output_qparams(node)[0]
            except ValueError:
                continue
            if not isinstance(q.scale, float) or not isinstance(q.zp, int):
                continue
            bounds = activation_bounds(node)
            if bounds is None:
                continue
            lo, hi = (None if b is None else quantize_value(b, q.scale, q.zp, q.qmin, q.qmax)
                      for b in bounds)
            node.target = aten.clamp.default
            node.args = (x, lo, hi)
            modified = True
        if modified:
            graph_module = super().call(graph_module).graph_module
            graph_module.graph.eliminate_dead_code()
            graph_module.recompile()
        return PassResult(graph_module, modified)
