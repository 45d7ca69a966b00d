"""Convolution, batch norm, pooling, resizing and matrix products -> XNNPACK nodes.

Convolutions and pooling run NHWC. A convolution takes over a batch norm that follows it
(folded into its weights, as ExecuTorch's FuseBatchNormPass) and a relu/hardtanh/clamp after
that (its output range); a lone batch norm becomes a 1x1 depthwise convolution (4-D) or a
multiply-add (2-D/3-D). Filters are stored the way XNNPACK reads them: ``[O, H, W, I]``, a
depthwise filter ``[1, H, W, O]``.
"""

from __future__ import annotations

import math
from operator import getitem as _getitem

import torch
from torch.export import ExportedProgram
from torch.nn.utils.fusion import fuse_linear_bn_weights

from ....exir.passes.fuse_batch_norm import bn_scale_shift, fold_conv_bn_weights
from .. import schema as x
from .builder import (
    NCHW,
    NHWC,
    PERM_NCHW_TO_NHWC,
    PERM_NHWC_TO_NCHW,
    Builder,
    dynamic_reason,
    rule,
    shape_of,
    sole_user,
    static_tensor,
)
from .ops import arg, fused_activation
from .quant import (
    QDQ_OPS,
    emit_conv,
    emit_linear,
    gemm_reason,
    gemm_statics,
    weight_quant,
)

aten = torch.ops.aten
Node = torch.fx.Node
BATCH_NORM = aten._native_batch_norm_legit_no_training.default


def _pair(v: object, default: int) -> list[int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return [default, default]
    if isinstance(v, int):
        return [v, v]
    v = [int(i) for i in v]  # type: ignore[union-attr]
    return v * 2 if len(v) == 1 else v


def _owned(node: object, ep: ExportedProgram, what: str) -> str | None:
    """Why a weight cannot be baked into the delegate (None when it can)."""
    if static_tensor(ep, node) is None:
        return f"the {what} is not a constant (XNNPACK needs static {what}s here)"
    return None


def _weights(*indices: int):
    """``statics`` for a rule: the node arguments at ``indices`` that are given."""
    def statics(node: Node) -> list[Node]:
        return [node.args[i] for i in indices
                if len(node.args) > i and isinstance(node.args[i], Node)]
    return statics


# ---- batch norm ---------------------------------------------------------------------------


def _bn_reason(node: Node, ep: ExportedProgram) -> str | None:
    if any(u.target is not _getitem or u.args[1] != 0 for u in node.users):
        return "a batch-norm statistic other than the output is used"
    rank = len(shape_of(node.args[0]))
    if rank not in (2, 3, 4):
        return f"batch norm of a rank-{rank} tensor (XNNPACK lowers ranks 2-4)"
    for i, what in ((1, "weight"), (2, "bias"), (3, "running mean"), (4, "running var")):
        if node.args[i] is not None:
            why = _owned(node.args[i], ep, f"batch-norm {what}")
            if why:
                return why
    return None


def _bn_params(g: Builder, bn: Node) -> tuple:
    """(running mean, running var, eps, weight or None, bias or None) of a batch norm."""
    def static(i: int) -> torch.Tensor | None:
        return None if bn.args[i] is None else g.static(bn.args[i]).detach()
    return static(3), static(4), float(bn.args[-1]), static(1), static(2)


def _bn_scale_shift(g: Builder, bn: Node) -> tuple[torch.Tensor, torch.Tensor]:
    """``y = x * scale + shift`` per channel (``fuse_batch_norm.bn_scale_shift``)."""
    return bn_scale_shift(*_bn_params(g, bn))


def _following_batch_norm(g: Builder, node: Node) -> tuple[Node, Node] | None:
    """``(batch_norm, getitem)`` when ``node``'s only use is a batch norm to fold into it."""
    bn = sole_user(node)
    if bn is None or bn.target != BATCH_NORM or len(bn.users) != 1:
        return None
    item = next(iter(bn.users))
    if item.target is not _getitem or item.args[1] != 0:
        return None
    if any(g.static(bn.args[i]) is None for i in (3, 4)) or any(
            bn.args[i] is not None and g.static(bn.args[i]) is None for i in (1, 2)):
        return None
    return bn, item


@rule(BATCH_NORM, check=_bn_reason, statics=_weights(1, 2, 3, 4))
def _batch_norm(g: Builder, node: Node) -> None:
    inp = node.args[0]
    scale, shift = _bn_scale_shift(g, node)
    rank = len(shape_of(inp))
    if rank == 4:  # a 1x1 depthwise convolution, NHWC
        item = next(iter(node.users))
        g.done.add(item)
        tail, bounds = fused_activation(g, item)
        c = scale.numel()
        conv = x.XNNDepthwiseConv2d(
            0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, c, 0, 0, g.get(inp, NHWC),
            g.constant(scale.float().reshape(1, 1, 1, c)), g.constant(shift.float()), 0)
        conv.output_id = g.out(tail, NHWC)
        g.add(conv, bounds)
        return
    shape = [-1] + [1] * (rank - 2)  # channels are dim 1
    mid = g.value(shape_of(inp))
    g.add(x.XNNMultiply(g.get(inp, NCHW), g.constant(scale.float().reshape(shape)), mid))
    g.add(x.XNNAdd(mid, g.constant(shift.float().reshape(shape)), g.out(node, NCHW)))


# ---- convolution --------------------------------------------------------------------------


def _is_quantized_gemm(node: Node, ep: ExportedProgram) -> bool:
    w = node.args[1]
    return isinstance(w, Node) and w.op == "call_function" and w.target in QDQ_OPS


def _check_conv(node: Node, ep: ExportedProgram) -> str | None:
    if _is_quantized_gemm(node, ep):
        return gemm_reason(node, ep)
    rank = len(shape_of(node.args[1]))
    if rank not in (3, 4):
        return f"{rank - 2}-D convolution (XNNPACK lowers 1-D and 2-D)"
    why = _owned(node.args[1], ep, "filter")
    if why:
        return why
    if rank == 3 and dynamic_reason(node.args[0]):
        return dynamic_reason(node.args[0])
    if node.args[2] is not None:
        return _owned(node.args[2], ep, "bias")
    return None


def _conv_params(node: Node) -> dict:
    _, w, _, stride, padding, dilation, transposed, output_padding, groups = node.args
    one_d = len(shape_of(w)) == 3

    def spatial(v: object, default: int) -> list[int]:
        return [default, _pair(v, default)[0]] if one_d else _pair(v, default)

    return dict(stride=spatial(stride, 1), padding=spatial(padding, 0),
                dilation=spatial(dilation, 1), output_padding=spatial(output_padding, 0),
                transposed=bool(transposed), groups=int(groups), one_d=one_d)


@rule(aten.convolution.default, check=_check_conv, statics=gemm_statics)
def _convolution(g: Builder, node: Node) -> None:
    p = _conv_params(node)
    wq = weight_quant(g.ep, node.args[1])
    if wq is not None:
        emit_conv(g, node, wq, fused_activation, p)
        return
    weight = g.static(node.args[1]).detach()
    bias_node = node.args[2]
    bias = g.static(bias_node).detach() if bias_node is not None else None
    groups, transposed = p["groups"], p["transposed"]
    tail = node
    folded = _following_batch_norm(g, node) if len(shape_of(node)) in (3, 4) else None
    if folded is not None:
        bn, item = folded
        weight, bias = _fold_into_conv(g, bn, weight, bias, transposed, groups)
        g.done.update((bn, item))
        tail = item
    tail, bounds = fused_activation(g, tail)
    if p["one_d"]:
        weight = weight.unsqueeze(2)

    kh, kw = weight.shape[2], weight.shape[3]
    if transposed:
        cin, per_group_out = weight.shape[0], weight.shape[1]
        group_in, group_out = cin // groups, per_group_out
        filt = (weight.reshape(groups, group_in, group_out, kh, kw).permute(0, 2, 1, 3, 4)
                .reshape(groups * group_out, group_in, kh, kw))
        cls = x.XNNConvTranspose2d
    else:
        group_in, group_out = weight.shape[1], weight.shape[0] // groups
        filt = weight
        cls = x.XNNDepthwiseConv2d if group_in == 1 else x.XNNConv2d
        if cls is x.XNNDepthwiseConv2d:  # [O, 1, H, W] -> [1, H, W, O]
            filt = weight.permute(1, 0, 2, 3)

    inp = node.args[0]  # values in ExecuTorch's order: input, filter, output, bias
    if p["one_d"]:  # [N, C, L] -> [N, 1, L, C]
        n, c, length = shape_of(inp)
        src = g.reshape(g.transpose(g.get(inp, NCHW), (0, 2, 1)), (n, 1, length, c))
        filt_id = g.constant(filt.permute(PERM_NCHW_TO_NHWC))
        n, co, lo = shape_of(tail)
        out = g.value((n, 1, lo, co))
    else:
        src = g.get(inp, NHWC)
        filt_id = g.constant(filt.permute(PERM_NCHW_TO_NHWC))
        out = g.out(tail, NHWC)
    bias_id = g.constant(bias) if bias is not None else x.XNN_INVALID_VALUE_ID
    (pt, pl), (sh, sw), (dh, dw) = p["padding"], p["stride"], p["dilation"]
    ah, aw = p["output_padding"] if transposed else (0, 0)
    conv = cls(pt, pl, pt, pl, kh, kw, sh, sw, dh, dw, group_in, group_out, groups, ah, aw,
               src, filt_id, bias_id, out)
    g.add(conv, bounds)
    if p["one_d"]:
        g.put(tail, g.transpose(g.reshape(out, (n, lo, co)), (0, 2, 1)), NCHW)


def _fold_into_conv(g: Builder, bn: Node, weight: torch.Tensor, bias: torch.Tensor | None,
                    transposed: bool, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The convolution's weight and bias with the batch norm after it folded in (the
    ahead-of-time pass's arithmetic: ``exir/passes/fuse_batch_norm.py``)."""
    mean, var, eps, gamma, beta = _bn_params(g, bn)
    return fold_conv_bn_weights(weight, bias, mean, var, eps, gamma, beta, transposed, groups)


# ---- pooling ------------------------------------------------------------------------------


def _pool_args(node: Node) -> tuple[list[int], list[int], list[int], list[int]]:
    kernel = _pair(node.args[1], 1)
    stride = _pair(arg(node, 2, "stride"), 0)
    stride = kernel if stride == [0, 0] else stride
    padding = _pair(arg(node, 3, "padding", 0), 0)
    is_max = node.target != aten.avg_pool2d.default
    dilation = _pair(arg(node, 4, "dilation", 1), 1) if is_max else [1, 1]
    return kernel, stride, padding, dilation


def _check_pool_common(node: Node) -> str | None:
    if len(shape_of(node.args[0])) != 4:
        return "pooling of a tensor that is not 4-D (NCHW)"
    kernel, stride, _, _ = _pool_args(node)
    if kernel[0] * kernel[1] <= 1:
        return "a 1x1 pooling window"
    if stride[0] > kernel[0] or stride[1] > kernel[1]:
        return f"stride {stride} larger than the window {kernel}"
    return None


def _check_max_pool(node: Node, ep: ExportedProgram) -> str | None:
    if node.target == aten.max_pool2d_with_indices.default:
        # As ExecuTorch 1.5.1's partitioner: only max_pool2d, which to_edge_transform_and_lower
        # keeps whole when XNNPACK takes it; what was decomposed stays outside.
        return ("max_pool2d_with_indices (XNNPACK takes max_pool2d kept whole by "
                "to_edge_transform_and_lower; its max pooling does not compute indices)")
    if arg(node, 5, "ceil_mode", False) and dynamic_reason(node.args[0]):
        return f"ceil_mode with {dynamic_reason(node.args[0])}"
    return _check_pool_common(node)


def _ceil_extra(size: int, k: int, s: int, p: int, d: int) -> int:
    """Extra end padding that makes floor division give ceil_mode's output size."""
    span = size + 2 * p - d * (k - 1) - 1
    ceil_out = -(-span // s) + 1
    if (ceil_out - 1) * s >= size + p:  # PyTorch drops a last window that starts in padding
        ceil_out -= 1
    return max((ceil_out - 1) * s - span, 0)


@rule(aten.max_pool2d.default, aten.max_pool2d_with_indices.default, check=_check_max_pool)
def _max_pool(g: Builder, node: Node) -> None:
    inp = node.args[0]
    kernel, stride, padding, dilation = _pool_args(node)
    bottom, right = padding
    if arg(node, 5, "ceil_mode", False):
        _, _, h, w = shape_of(inp)
        bottom += _ceil_extra(h, kernel[0], stride[0], padding[0], dilation[0])
        right += _ceil_extra(w, kernel[1], stride[1], padding[1], dilation[1])
    g.add(x.XNNMaxPooling2d(padding[0], right, bottom, padding[1], kernel[0], kernel[1],
                            stride[0], stride[1], dilation[0], dilation[1], g.get(inp, NHWC),
                            g.out(node, NHWC), x.XNN_FLAG_KEEP_DIMS))


_MIN_REDUCTIONS = (aten.amin.default, aten.min.dim)


def _reduced_dims(node: Node) -> list[int]:
    rank = len(shape_of(node.args[0]))
    if node.target in (aten.max.dim, aten.min.dim):
        dims = [node.args[1]]
    else:
        dims = list(arg(node, 1, "dim", []) or range(rank))
    return sorted(d % rank for d in dims)


def _check_spatial_max(node: Node, ep: ExportedProgram) -> str | None:
    shape = shape_of(node.args[0])
    if len(shape) != 4:
        return f"a max/min over a rank-{len(shape)} tensor (XNNPACK pools 4-D tensors)"
    dims = _reduced_dims(node)
    if not set(dims) <= {2, 3}:
        return f"a max/min over dims {dims} (XNNPACK max-pools over H and W only)"
    if node.target in (aten.max.dim, aten.min.dim) and any(
            u.target is not _getitem or u.args[1] != 0 for u in node.users):
        return "the indices are used (lowered as max pooling, which does not compute them)"
    if dynamic_reason(node.args[0]):
        return dynamic_reason(node.args[0])
    if math.prod(shape[d] for d in dims) <= 1:
        return "a max/min over size-1 dimensions"
    return None


@rule(aten.amax.default, aten.amin.default, aten.max.dim, aten.min.dim,
      check=_check_spatial_max)
def _spatial_max(g: Builder, node: Node) -> None:
    """A max over H and/or W is a max pooling with the reduced extent as its window (as
    ExecuTorch lowers amax); a min is the same between two negations."""
    inp = node.args[0]
    n, c, h, w = shape_of(inp)
    dims = _reduced_dims(node)
    kh, kw = (h if 2 in dims else 1), (w if 3 in dims else 1)
    src = g.get(inp, NHWC)
    negate = node.target in _MIN_REDUCTIONS
    if negate:
        src_neg = g.value(g.dims(src))
        g.add(x.XNNNegate(src, src_neg))
        src = src_neg
    pooled = g.value((n, h // kh, w // kw, c))
    g.add(x.XNNMaxPooling2d(0, 0, 0, 0, kh, kw, kh, kw, 1, 1, src, pooled, 0))
    if negate:
        result = g.value(g.dims(pooled))
        g.add(x.XNNNegate(pooled, result))
        pooled = result
    if arg(node, 2, "keepdim", False):
        g.put(node, pooled, NHWC)
    else:
        nchw = pooled if dims == [2, 3] else g.transpose(pooled, PERM_NHWC_TO_NCHW)
        g.put(node, g.reshape(nchw, node), NCHW)


def _check_avg_pool(node: Node, ep: ExportedProgram) -> str | None:
    why = _check_pool_common(node)
    if why:
        return why
    kernel, _, padding, _ = _pool_args(node)
    if arg(node, 4, "ceil_mode", False):
        return "ceil_mode=True average pooling"
    if arg(node, 5, "count_include_pad", True) and any(padding):
        return "count_include_pad with padding (XNNPACK leaves padding out of the average)"
    divisor = arg(node, 6, "divisor_override")
    if divisor is not None and divisor != kernel[0] * kernel[1]:
        return f"divisor_override={divisor}"
    return None


@rule(aten.avg_pool2d.default, check=_check_avg_pool)
def _avg_pool(g: Builder, node: Node) -> None:
    inp = node.args[0]
    kernel, stride, (ph, pw), _ = _pool_args(node)
    g.add(x.XNNAvgPooling2d(ph, pw, ph, pw, kernel[0], kernel[1], stride[0], stride[1], 0, 0,
                            g.get(inp, NHWC), g.out(node, NHWC), x.XNN_FLAG_KEEP_DIMS))


def _check_mean(node: Node, ep: ExportedProgram) -> str | None:
    shape = shape_of(node.args[0])
    if len(shape) != 4:
        return f"mean of a rank-{len(shape)} tensor (XNNPACK averages 4-D tensors over H, W)"
    dims = sorted(d % 4 for d in (node.args[1] or range(4)))
    if dims != [2, 3]:
        return f"mean over dims {node.args[1]} (XNNPACK averages over the last two only)"
    if node.kwargs.get("dtype") is not None:
        return "mean with a dtype argument"
    if not arg(node, 2, "keepdim", False):
        return "mean with keepdim=False (ExecuTorch 1.5.1's partitioner takes keepdim=True only)"
    return None


@rule(aten.mean.dim, check=_check_mean)
def _mean(g: Builder, node: Node) -> None:
    _global_avg_pool(g, node)


def _global_avg_pool(g: Builder, node: Node) -> None:
    g.add(x.XNNGlobalAvgPooling2d(g.get(node.args[0], NHWC), g.out(node, NHWC),
                                  x.XNN_FLAG_KEEP_DIMS))


def _check_adaptive(node: Node, ep: ExportedProgram) -> str | None:
    if dynamic_reason(node.args[0]):
        return dynamic_reason(node.args[0])
    _, _, h, w = shape_of(node.args[0])
    oh, ow = shape_of(node)[2:]
    if (oh, ow) != (1, 1) and (h % oh or w % ow):
        return f"adaptive pooling {h}x{w} -> {oh}x{ow} has uneven windows"
    if (oh, ow) != (1, 1) and (h // oh) * (w // ow) <= 1:
        return "adaptive pooling to the input's own size"
    return None


@rule(aten._adaptive_avg_pool2d.default, check=_check_adaptive)
def _adaptive_avg_pool(g: Builder, node: Node) -> None:
    inp = node.args[0]
    _, _, h, w = shape_of(inp)
    oh, ow = shape_of(node)[2:]
    if (oh, ow) == (1, 1):
        _global_avg_pool(g, node)
        return
    kh, kw = h // oh, w // ow
    g.add(x.XNNAvgPooling2d(0, 0, 0, 0, kh, kw, kh, kw, 0, 0, g.get(inp, NHWC),
                            g.out(node, NHWC), x.XNN_FLAG_KEEP_DIMS))


def _check_upsample(node: Node, ep: ExportedProgram) -> str | None:
    if dynamic_reason(node.args[0], node):
        return dynamic_reason(node.args[0], node)
    in_h, in_w = shape_of(node.args[0])[2:]
    out_h, out_w = shape_of(node)[2:]
    scales = arg(node, 3, "scale_factors") if node.target == aten.upsample_bilinear2d.vec \
        else (arg(node, 3, "scales_h"), arg(node, 4, "scales_w"))
    if scales and not arg(node, 2, "align_corners", False):
        for size, out, s in ((in_h, out_h, scales[0]), (in_w, out_w, scales[1])):
            if s is not None and not math.isclose(size * s, out):
                return (f"scale factor {s} does not give a whole output size ({size} -> {out}); "
                        "XNNPACK scales by the size ratio")
    return None


@rule(aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default, check=_check_upsample)
def _upsample_bilinear(g: Builder, node: Node) -> None:
    out_h, out_w = shape_of(node)[2:]
    flags = x.XNN_FLAG_ALIGN_CORNERS if arg(node, 2, "align_corners", False) else 0
    g.add(x.XNNStaticResizeBilinear2D(out_h, out_w, g.get(node.args[0], NHWC),
                                      g.out(node, NHWC), flags))


def _check_prelu(node: Node, ep: ExportedProgram) -> str | None:
    shape = shape_of(node.args[0])
    if len(shape) != 4:
        return f"PReLU of a rank-{len(shape)} tensor (XNNPACK's slope runs over NHWC channels)"
    weight = static_tensor(ep, node.args[1])
    if weight is None:
        return "the PReLU slope is not a constant"
    if weight.numel() not in (1, shape[1]):
        return f"a slope of {weight.numel()} values for {shape[1]} channels"
    return None


@rule(aten.prelu.default, check=_check_prelu, statics=_weights(1))
def _prelu(g: Builder, node: Node) -> None:
    """XNNPACK's slope is per channel: a single slope is repeated (ExecuTorch's
    PReLUReshapePass)."""
    inp = node.args[0]
    channels = shape_of(inp)[1]
    slope = g.static(node.args[1]).detach().reshape(-1).expand(channels)
    g.add(x.XNNPReLU(g.get(inp, NHWC), g.constant(slope), g.out(node, NHWC)))


# ---- matrix products ----------------------------------------------------------------------


def _check_linear(node: Node, ep: ExportedProgram) -> str | None:
    if len(shape_of(node.args[0])) < 2:
        return "linear of a 1-D input"
    if _is_quantized_gemm(node, ep):
        return gemm_reason(node, ep)
    # ExecuTorch 1.5.1's XNNPACK runtime crashes on a fully connected node whose weight is
    # computed at run time (e.g. dequantized outside the delegate): keep those outside.
    for i, what in ((1, "weight"), (2, "bias")):
        a = arg(node, i, what)
        if a is not None and static_tensor(ep, a) is None:
            return f"the {what} %{getattr(a, 'name', a)} is not a constant (XNNPACK's fully " \
                "connected node needs constant weights)"
    return None


@rule(aten.linear.default, check=_check_linear, statics=gemm_statics)
def _linear(g: Builder, node: Node) -> None:
    inp, w_node = node.args[0], node.args[1]
    wq = weight_quant(g.ep, w_node)
    if wq is not None:
        emit_linear(g, node, wq, fused_activation)
        return
    b_node = arg(node, 2, "bias")
    weight, bias = g.static(w_node), g.static(b_node)
    tail = node
    folded = (_following_batch_norm(g, node) if weight is not None and len(shape_of(node)) == 2
              and (b_node is None or bias is not None) else None)
    if folded is not None:
        bn, item = folded
        mean, var, eps, gamma, beta = _bn_params(g, bn)
        weight, bias = fuse_linear_bn_weights(
            weight.detach(), None if bias is None else bias.detach(), mean, var, eps,
            gamma if gamma is not None else torch.ones_like(mean),
            beta if beta is not None else torch.zeros_like(mean))
        g.done.update((bn, item))
        tail = item
    tail, bounds = fused_activation(g, tail)
    w_id = g.constant(weight) if weight is not None else g.get(w_node, NCHW)
    if bias is not None:
        b_id = g.constant(bias)
    else:
        b_id = g.get(b_node, NCHW) if b_node is not None else x.XNN_INVALID_VALUE_ID
    g.add(x.XNNFullyConnected(g.get(inp, NCHW), w_id, b_id, g.out(tail, NCHW)), bounds)


def _check_addmm(node: Node, ep: ExportedProgram) -> str | None:
    for name, index in (("beta", 3), ("alpha", 4)):
        if arg(node, index, name, 1) != 1:
            return f"{name}={arg(node, index, name)} (XNNPACK computes bias + a @ b only)"
    return _check_mm(node, ep)


def _check_mm(node: Node, ep: ExportedProgram) -> str | None:
    b = node.args[-1] if node.target == aten.mm.default else node.args[2]
    if static_tensor(ep, b) is None:  # a batch matrix multiply between reshapes
        return dynamic_reason(*node.all_input_nodes)
    return None


@rule(aten.addmm.default, check=_check_addmm)
def _addmm(g: Builder, node: Node) -> None:
    bias_node, a, b = node.args[:3]
    n = shape_of(node)[1]
    bias = g.static(bias_node)
    if bias is not None and bias.numel() == n and g.static(b) is not None:
        _fully_connected(g, node, a, b, g.constant(bias.reshape(n)))
        return
    mid = g.value(shape_of(node))
    _matmul(g, a, b, mid)
    g.add(x.XNNAdd(mid, g.get(bias_node, NCHW), g.out(node, NCHW)))


@rule(aten.mm.default, check=_check_mm)
def _mm(g: Builder, node: Node) -> None:
    a, b = node.args
    if g.static(b) is not None:
        _fully_connected(g, node, a, b, x.XNN_INVALID_VALUE_ID)
    else:
        _matmul(g, a, b, g.out(node, NCHW))


def _fully_connected(g: Builder, node: Node, a: Node, b: Node, bias_id: int) -> None:
    """``a @ b`` with a constant ``b`` ([K, N]: XNN_FLAG_TRANSPOSE_WEIGHTS)."""
    g.add(x.XNNFullyConnected(g.get(a, NCHW), g.constant(g.static(b)), bias_id,
                              g.out(node, NCHW), x.XNN_FLAG_TRANSPOSE_WEIGHTS))


def _matmul(g: Builder, a: Node, b: Node, out: int) -> None:
    """2-D ``a @ b`` as a batch of one (XNNPACK's batch matrix multiply is 3-D)."""
    (m, k), (_, n) = shape_of(a), shape_of(b)
    a3 = g.reshape(g.get(a, NCHW), (1, m, k))
    b3 = g.reshape(g.get(b, NCHW), (1, k, n))
    out3 = g.value((1, m, n))
    g.add(x.XNNBatchMatrixMultiply(a3, b3, out3))
    g.add(x.XNNStaticReshape(2, [m, n], out3, out))


@rule(aten.bmm.default)
def _bmm(g: Builder, node: Node) -> None:
    a, b = node.args
    g.add(x.XNNBatchMatrixMultiply(g.get(a, NCHW), g.get(b, NCHW), g.out(node, NCHW)))
