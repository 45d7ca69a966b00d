"""``AtenToCortexMPass``: quantized Edge ops (qparams folded into their meta) become the
``cortex_m::`` ops CMSIS-NN implements, with every constant the kernel wants precomputed:
per-channel requantization pairs, NHWC/OHWI weights, linear kernel sums (MVE), LUTs, and a
scratch buffer per kernel. ExecuTorch's substitutions, rule for rule (one function per
operator, in ``RULES``); a rule returning None leaves the node as it is.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.pass_base import PassResult

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass
from ..ops.arith import (
    SHIFT_INT8,
    SOFTMAX_SCALE,
    SOFTMAX_ZERO_POINT,
    quantize_multiplier,
    softmax_params,
)
from ..ops.layout import to_physical
from .activation_lut import LUT_FUNCTIONS, build_activation_lut
from .graph_utils import (
    create_constant_placeholder,
    fake,
    get_param_tensor,
    is_param_node,
    scratch_alloc,
)
from .qparams import Q_PER_TENSOR
from .scratch import set_scratch_sizes

aten, cm, qd = exir_ops.edge.aten, exir_ops.edge.cortex_m, exir_ops.edge.quantized_decomposed
Rule = Callable[[Node, "AtenToCortexMPass"], "tuple[Any, tuple] | None"]
RULES: dict[Any, Rule] = {}


def rule(*targets: Any) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        for t in targets:
            if t in RULES:
                raise RuntimeError(f"two Cortex-M rules for {t}")
            RULES[t] = fn
        return fn
    return deco


def _qparams(node: Node) -> bool:
    return bool(node.meta.get("input_qparams")) and bool(node.meta.get("output_qparams"))


def quantize_value(value: float, scale: float, zp: int, qmin: int, qmax: int) -> int:
    """ExecuTorch's ``quantize_val``: ``round(v / s + zp)`` in float32, clamped."""
    q = torch.round(torch.tensor([value / scale + zp], dtype=torch.float32)).item()
    return int(min(max(q, qmin), qmax))


class AtenToCortexMPass(ExportPass):
    def __init__(self, exported_program, target_config):
        super().__init__()
        self.exported_program = exported_program
        self.target_config = target_config

    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            fn = RULES.get(node.target) if node.op == "call_function" else None
            spec = fn(node, self) if fn is not None else None
            if spec is None:
                continue
            op, args = spec
            with graph.inserting_before(node):
                new = graph.call_function(op, args, {})
            node.replace_all_uses_with(new)
            new.meta = node.meta
            graph.erase_node(node)
            modified = True
        if modified:
            graph.eliminate_dead_code()
            graph_module.recompile()
            graph_module = super().call(graph_module).graph_module
        restored = _restore_max_pool_with_indices(graph_module)
        for node in graph_module.graph.nodes:
            set_scratch_sizes(node, self.target_config.backend)
        return PassResult(graph_module, modified or restored)


def _restore_max_pool_with_indices(gm: GraphModule) -> bool:
    """A max_pool2d the Cortex-M kernel does not take returns to the portable
    ``max_pool2d_with_indices`` (RemoveGetItemPass had turned it into ``max_pool2d``)."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target != aten.max_pool2d.default:
            continue
        val = fake(node)
        with gm.graph.inserting_before(node):
            pool = gm.graph.call_function(aten.max_pool2d_with_indices.default, node.args,
                                          node.kwargs)
            item = gm.graph.call_function(operator.getitem, (pool, 0))
        pool.meta = dict(node.meta)
        pool.meta["val"] = (val, val.new_empty(val.shape, dtype=torch.int64))
        pool.meta.pop("tensor_meta", None)
        item.meta = dict(node.meta)
        item.meta["val"] = val
        node.replace_all_uses_with(item)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return changed


def _first_placeholder(graph) -> Node:
    return next(n for n in graph.nodes if n.op == "placeholder")


@rule(*LUT_FUNCTIONS)
def _activation(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    qi, qo = node.meta["input_qparams"][0], node.meta["output_qparams"][0]
    lut = build_activation_lut(node.target, float(qi.scale), int(qi.zp), float(qo.scale),
                               int(qo.zp))
    with node.graph.inserting_before(_first_placeholder(node.graph)):
        lut_node = create_constant_placeholder(p.exported_program, node.graph,
                                               node.name + "_lut", lut)
    return cm.quantized_activation.default, (node.args[0], lut_node)


def kernel_sum(weights: torch.Tensor, bias: torch.Tensor | None, input_offset: int,
               weight_offset: int) -> torch.Tensor:
    """CMSIS-NN's MVE fully connected term ``input_offset * sum_j(w_ij + weight_offset) + b_i``."""
    total = torch.sum(weights.T.to(torch.int32) + weight_offset, dim=0, keepdim=True,
                      dtype=torch.int32) * input_offset
    return total + bias if bias is not None else total


@rule(aten.linear.default)
def _linear(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    from ..library.cmsis_nn import Backend

    qi, qw = node.meta["input_qparams"][0], node.meta["input_qparams"][1]
    qo = node.meta["output_qparams"][0]
    if qw.zp != 0:
        raise NotImplementedError(f"cortex_m::quantized_linear needs symmetric weights "
                                  f"(weight_zp == 0); got {qw.zp}")
    mult, shift = quantize_multiplier(qi.scale * qw.scale / qo.scale)
    weights = node.args[1]
    bias = node.args[2] if len(node.args) > 2 else None
    ep = p.exported_program
    if p.target_config.backend == Backend.MVE:
        # MVE reads a precomputed kernel sum and ignores the bias; DSP/scalar the reverse
        ks = kernel_sum(get_param_tensor(ep, weights), get_param_tensor(ep, bias), -qi.zp,
                        -qw.zp)
        with node.graph.inserting_after(weights):
            ks_node = create_constant_placeholder(ep, node.graph, node.name + "_kernel_sum", ks)
        bias = None
    else:
        ks_node = None
    return cm.quantized_linear.default, (node.args[0], weights, bias, ks_node, -qi.zp, -qw.zp,
                                         qo.zp, [mult], [shift], qo.qmax, qo.qmin)


def _requant_pairs(qi, weight_scales, qo) -> tuple[list[int], list[int]]:
    pairs = [quantize_multiplier(qi.scale * ws / qo.scale) for ws in weight_scales]
    return [m for m, _ in pairs], [s for _, s in pairs]


def _weight_constants(node: Node, p: AtenToCortexMPass, weight: Node, permuted: torch.Tensor,
                      mults: list[int], shifts: list[int], zero_bias: int | None):
    ep, graph = p.exported_program, node.graph
    bias = None
    with graph.inserting_after(weight):
        if zero_bias is not None:
            # grouped kernels offset the bias pointer per group: it must exist
            bias = create_constant_placeholder(ep, graph, node.name + "_zero_bias",
                                               torch.zeros(zero_bias, dtype=torch.int32))
        w = create_constant_placeholder(ep, graph, node.name + "_weight_nhwc", permuted)
        m = create_constant_placeholder(ep, graph, node.name + "_quantized_multiplier",
                                        torch.tensor(mults, dtype=torch.int32))
        s = create_constant_placeholder(ep, graph, node.name + "_quantized_shift",
                                        torch.tensor(shifts, dtype=torch.int32))
    return bias, w, m, s


@rule(aten.convolution.default)
def _convolution(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
    if transposed:
        return _transpose_conv(node, p)
    qi, qw, qo = (node.meta["input_qparams"][0], node.meta["input_qparams"][1],
                  node.meta["output_qparams"][0])
    w = get_param_tensor(p.exported_program, weight)
    if w is None:
        raise RuntimeError(f"{node.name}: the convolution weight must be a constant")
    scales = qw.scale if isinstance(qw.scale, list) else [qw.scale] * w.shape[0]
    mults, shifts = _requant_pairs(qi, scales, qo)
    in_ch, out_ch = w.shape[1] * groups, w.shape[0]
    depthwise = in_ch == groups and out_ch % in_ch == 0 and fake(node).shape[0] == 1
    # CMSIS-NN wants IHWO depthwise and OHWI regular weights, densely packed
    permuted = (w.permute(1, 2, 3, 0) if depthwise else w.permute(0, 2, 3, 1)).contiguous()
    zb = out_ch if bias is None and groups > 1 else None
    new_bias, w_node, m_node, s_node = _weight_constants(node, p, weight, permuted, mults,
                                                         shifts, zb)
    bias = new_bias if zb is not None else bias
    scratch = scratch_alloc(node.graph, node)
    if depthwise:
        return cm.quantized_depthwise_conv2d.default, (
            x, w_node, bias, stride, padding, dilation, out_ch // in_ch, -qi.zp, qo.zp, m_node,
            s_node, qo.qmin, qo.qmax, scratch)
    return cm.quantized_conv2d.default, (x, w_node, bias, stride, padding, dilation, -qi.zp,
                                         qo.zp, m_node, s_node, qo.qmin, qo.qmax, scratch)


def _transpose_conv(node: Node, p: AtenToCortexMPass):
    x, weight, bias, stride, padding, dilation, _, output_padding, _ = node.args
    qi, qw, qo = (node.meta["input_qparams"][0], node.meta["input_qparams"][1],
                  node.meta["output_qparams"][0])
    w = get_param_tensor(p.exported_program, weight)
    if w is None:
        raise RuntimeError(f"{node.name}: the transposed convolution weight must be a constant")
    scales = qw.scale if isinstance(qw.scale, list) else [qw.scale] * fake(weight).shape[1]
    mults, shifts = _requant_pairs(qi, scales, qo)
    _, w_node, m_node, s_node = _weight_constants(
        node, p, weight, w.permute(1, 2, 3, 0).contiguous(), mults, shifts, None)
    scratch = scratch_alloc(node.graph, node)
    out_scratch = scratch_alloc(node.graph, node)
    return cm.quantized_transpose_conv2d.default, (
        x, w_node, bias, stride, padding, output_padding, dilation, -qi.zp, qo.zp, m_node,
        s_node, qo.qmin, qo.qmax, scratch, out_scratch)


@rule(aten.bmm.default)
def _bmm(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    qa, qb, qo = (node.meta["input_qparams"][0], node.meta["input_qparams"][1],
                  node.meta["output_qparams"][0])
    mult, shift = quantize_multiplier(qa.scale * qb.scale / qo.scale)
    lhs, rhs = node.args[0], node.args[1]
    ep = p.exported_program
    if is_param_node(ep, rhs):
        with node.graph.inserting_after(rhs):
            rhs_t = create_constant_placeholder(
                ep, node.graph, node.name + "_rhs_transposed",
                get_param_tensor(ep, rhs).permute(0, 2, 1).contiguous())
    else:
        with node.graph.inserting_before(node):
            rhs_t = node.graph.call_function(cm.transpose.default, (rhs, [0, 2, 1]))
    scratch = scratch_alloc(node.graph, node)
    return cm.quantized_batch_matmul.default, (lhs, -qa.zp, rhs_t, -qb.zp, qo.zp, mult, shift,
                                               scratch)


@rule(aten.avg_pool2d.default)
def _avg_pool(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    a = node.args
    kernel = a[1]
    stride = a[2] if len(a) > 2 else list(kernel)
    padding = a[3] if len(a) > 3 else [0, 0]
    ceil_mode = a[4] if len(a) > 4 else False
    count_include_pad = a[5] if len(a) > 5 else True
    if (a[6] if len(a) > 6 else None) is not None:
        return None
    qi = node.meta["input_qparams"][0]
    mult, shift = quantize_multiplier(qi.scale)
    x = a[0]
    if count_include_pad:
        # padding counted in the average = explicit zero-point padding, then a plain pool
        pads = to_physical([0, 0, padding[0], padding[1]], fake(x))
        with node.graph.inserting_before(node):
            x = node.graph.call_function(cm.pad.default, (x, pads, pads, int(qi.zp)))
        padding = [0, 0]
    scratch = scratch_alloc(node.graph, node)
    return cm.quantized_avg_pool2d.default, (x, kernel, stride, padding, ceil_mode,
                                             int(qi.zp), int(mult), int(shift), scratch)


def _qualified_qdq(node: Node) -> bool:
    dtype, lo, hi = node.args[5], node.args[3], node.args[4]
    if dtype not in (torch.int8, torch.int16):
        return False
    info = torch.iinfo(dtype)
    return lo >= info.min and hi <= info.max


@rule(qd.quantize_per_tensor.default)
def _quantize(node: Node, p: AtenToCortexMPass):
    return (cm.quantize_per_tensor.default, node.args) if _qualified_qdq(node) else None


@rule(qd.dequantize_per_tensor.default)
def _dequantize(node: Node, p: AtenToCortexMPass):
    return (cm.dequantize_per_tensor.default, node.args) if _qualified_qdq(node) else None


@rule(aten.add.Tensor, aten.sub.Tensor)
def _add(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    alpha = node.kwargs.get("alpha", 1)
    if not isinstance(alpha, int):
        raise RuntimeError(f"{node.target} carries alpha={alpha!r}; quantized_add can only "
                           "express an integer one.")
    q1, q2, qo = (node.meta["input_qparams"][0], node.meta["input_qparams"][1],
                  node.meta["output_qparams"][0])
    coefficient = -alpha if node.target == aten.sub.Tensor else alpha
    s1, s2 = q1.scale, abs(coefficient) * q2.scale
    both = 2 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / both)
    m2, sh2 = quantize_multiplier(s2 / both)
    if coefficient < 0:
        m2 = -m2
    mo, sho = quantize_multiplier(both / (qo.scale * (1 << SHIFT_INT8)))
    if sho > 0:
        sign = -1 if coefficient < 0 else 1
        worst = max(abs(d1 * s1 + sign * d2 * s2)
                    for d1 in (q1.qmin - q1.zp, q1.qmax - q1.zp)
                    for d2 in (q2.qmin - q2.zp, q2.qmax - q2.zp)) * (1 << SHIFT_INT8) / both
        if worst * 2 ** sho >= 2 ** 31:
            raise RuntimeError(
                f"{node.target}: an output scale of {qo.scale} against operand scales of "
                f"{s1} and {s2} needs a requantization the int32 kernel cannot hold. The "
                "operands nearly cancel over the calibration set; calibrate on data where "
                "they do not.")
    return cm.quantized_add.default, (node.args[0], q1.zp, m1, sh1, node.args[1], q2.zp, m2,
                                      sh2, qo.zp, mo, sho, qo.qmin, qo.qmax)


@rule(aten.mul.Tensor)
def _mul(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    q1, q2, qo = (node.meta["input_qparams"][0], node.meta["input_qparams"][1],
                  node.meta["output_qparams"][0])
    mo, so = quantize_multiplier(q1.scale * q2.scale / qo.scale)
    return cm.quantized_mul.default, (node.args[0], q1.zp, node.args[1], q2.zp, qo.zp, mo, so)


@rule(aten.div.Tensor)
def _div(node: Node, p: AtenToCortexMPass):
    if not _qparams(node):
        return None
    q1, q2, qo = (node.meta["input_qparams"][0], node.meta["input_qparams"][1],
                  node.meta["output_qparams"][0])
    # CMSIS-NN has no fixed-point division: the kernel divides in float
    return cm.quantized_div.default, (node.args[0], q1.zp, node.args[1], q2.zp, qo.zp,
                                      float(q1.scale / (q2.scale * qo.scale)))


@rule(aten._softmax.default)
def _softmax(node: Node, p: AtenToCortexMPass):
    if not _qparams(node) or (len(node.args) > 2 and node.args[2]):
        return None
    qi, qo = node.meta["input_qparams"][0], node.meta["output_qparams"][0]
    if not math.isclose(float(qo.scale), SOFTMAX_SCALE, rel_tol=0.0, abs_tol=1e-12) \
            or int(qo.zp) != SOFTMAX_ZERO_POINT:
        raise RuntimeError(f"softmax output qparams must be CMSIS-NN's (1/256, -128); got "
                           f"({qo.scale}, {qo.zp})")
    mult, shift, diff_min = softmax_params(float(qi.scale))
    return cm.softmax.default, (node.args[0], node.args[1], int(qi.zp), int(qo.zp), mult,
                                shift, diff_min)


def _int_pair(value, default):
    return value if value is not None else default  # a list stays a list, as in ExecuTorch


@rule(aten.max_pool2d.default)
def _max_pool(node: Node, p: AtenToCortexMPass):
    qi = node.meta.get("input_qparams", {}).get(0)
    if qi is None or node.meta.get("custom", {}).get("cortex_m", {}).get(
            "skip_quantized_max_pool2d", False):
        return None
    qo = (node.meta.get("output_qparams") or {}).get(0)
    if qo is not None:
        if qo.per_channel or abs(float(qi.scale) - float(qo.scale)) > 1e-6 or qi.zp != qo.zp:
            return None
        out_zp, lo, hi = int(qo.zp), int(qo.qmin), int(qo.qmax)
    else:
        out_zp, lo, hi = int(qi.zp), -128, 127
    a = node.args
    kernel = _int_pair(a[1], None)
    stride = _int_pair(a[2] if len(a) > 2 else None, kernel)
    padding = _int_pair(a[3] if len(a) > 3 else None, (0, 0))
    dilation = _int_pair(a[4] if len(a) > 4 else None, (1, 1))
    ceil_mode = bool(a[5]) if len(a) > 5 and a[5] is not None else False
    if tuple(dilation) != (1, 1) or ceil_mode:
        return None
    return cm.quantized_max_pool2d.default, (a[0], kernel, stride, padding, dilation, ceil_mode,
                                             int(qi.zp), out_zp, lo, hi)


@rule(aten.minimum.default)
def _minimum(node: Node, p: AtenToCortexMPass):
    ok = fake(node.args[0]).dtype in (torch.int8, torch.int32)
    return (cm.minimum.default, node.args) if ok else None


@rule(aten.maximum.default)
def _maximum(node: Node, p: AtenToCortexMPass):
    return (cm.maximum.default, node.args) if fake(node.args[0]).dtype == torch.int8 else None


@rule(aten.permute_copy.default)
def _permute(node: Node, p: AtenToCortexMPass):
    x = fake(node.args[0])
    if x.dtype != torch.int8:
        return None
    return cm.transpose.default, (node.args[0], [d % x.dim() for d in node.args[1]])


@rule(aten.constant_pad_nd.default)
def _pad(node: Node, p: AtenToCortexMPass):
    qi = node.meta.get("input_qparams", {})
    if not qi:
        return None
    value = float(node.args[2]) if len(node.args) > 2 else 0.0
    pad_value = quantize_value(value, float(qi[0].scale), int(qi[0].zp), -128, 127)
    x = fake(node.args[0])
    padding = node.args[1]
    if not 1 <= x.dim() <= 4 or len(padding) % 2 or len(padding) // 2 > x.dim():
        raise RuntimeError(f"cortex_m pad: padding {list(padding)} does not fit rank {x.dim()}")
    pre, post = [0, 0, 0, 0], [0, 0, 0, 0]
    for i in range(len(padding) // 2):
        pre[3 - i], post[3 - i] = int(padding[2 * i]), int(padding[2 * i + 1])
    return cm.pad.default, (node.args[0], to_physical(pre, x), to_physical(post, x), pad_value)


_ = Q_PER_TENSOR  # the quantize ops this pass leaves to ReplaceQuantNodesPass
