"""Rules for XNNPACK nodes that read or write quantized values (``kernels_quant.py`` has the
numerics, ``quant_values.py`` the value decoding).

A node whose values include a quantized one is lowered here (:func:`lower_node`); float nodes
go to ``nodes.lower``. Layout nodes (transpose, reshape, slice, copy, concatenation with
equal parameters) move int8 data unchanged, so they reuse the float rules. Output min/max of a
quantized node clamps in the int8 domain (``xnn_qs8_quantize`` of the bounds), as XNNPACK's
subgraph does, and binary nodes get the clamp node XNNPACK inserts for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....errors import ErrorCode, InvalidProgramError
from ....kernels.conv import nhwc
from .. import schema as x
from . import kernels_qb4w as QB
from . import kernels_quant as Q
from .nodes import (
    _UNARY,
    NODE_RULES,
    Compute,
    Ctx,
    Lowered,
    Op,
    lower,
    node_value_ids,
    output_range,
)
from .nodes_nn import _conv_window, _optional, _pool_window
from .quant_values import D, QParams

# ---- compiling nodes ------------------------------------------------------------------------------


class QCtx(Ctx):
    """A :class:`Ctx` that also knows each value's quantization parameters."""

    def __init__(self, *args: Any, quant: list[QParams | None]) -> None:
        super().__init__(*args)
        self._quant = quant
        self.fused, self.folded = {}, set()
        # (input slot, num_nonbatch_dims) -> output slot of the first dynamic quantization of
        # that input: ExecuTorch's graphs quantize an input once per consumer (q, k and v
        # projections each convert the same normed activations), the result is the same
        self.dynamic_converts: dict[tuple[int, int], int] = {}

    # Clamps folded into the producing node's requantization (fold_clamps): producer
    # output slot -> extra int8 bounds; clamp input slots whose clamp is then a no-op.
    fused: dict[int, tuple[int, int]]
    folded: set[int]

    def quant(self, slot: int) -> QParams | None:
        return self._quant[slot]

    def is_quantized(self, value_id: int) -> bool:
        """Whether value ``value_id`` is quantized (unknown ids are left to the rules)."""
        s = self._slots.get(value_id)
        return s is not None and self._quant[s] is not None

    def static(self, slot: int, what: str) -> QParams:
        q = self._quant[slot]
        if q is None or not q.per_tensor or q.datatype != D.xnn_datatype_qint8:
            got = "fp32" if q is None else q.datatype.name
            raise self.fail(f"{what} must be a per-tensor qint8 value, it is {got}")
        return q


QRule = Callable[[Any, QCtx], tuple[Compute, int]]
QUANT_NODE_RULES: dict[type, QRule] = {}
PASS_THROUGH = (x.XNNStaticTranspose, x.XNNStaticReshape, x.XNNStaticSlice, x.XNNCopy)


def qrule(*classes: type) -> Callable[[QRule], QRule]:
    def deco(fn: QRule) -> QRule:
        for cls in classes:
            QUANT_NODE_RULES[cls] = fn
        return fn
    return deco


def _value_ids(u: Any) -> list[int]:
    ins, outs = node_value_ids(u)
    return ins + outs


def lower_node(node: x.XNode, ctx: Ctx) -> Lowered:
    """The compiled ``node``: quantized rules for nodes that touch a quantized value."""
    u = node.xnode_union
    if not isinstance(ctx, QCtx) or not any(ctx.is_quantized(v) for v in _value_ids(u)):
        return lower(node, ctx)
    ctx.node = node
    fn = QUANT_NODE_RULES.get(type(u))
    if fn is None and type(u) in PASS_THROUGH:
        return lower(node, ctx)
    if fn is None:
        raise InvalidProgramError(
            f"{ctx.where}: no NumPy implementation of quantized XNNPACK node "
            f"{type(u).__name__}; quantized nodes supported: "
            f"{', '.join(sorted(c.__name__ for c in QUANT_NODE_RULES))}", code=ErrorCode.NotImplemented)
    compute, out = fn(u, ctx)
    env = ctx.env
    op = compute if isinstance(compute, Op) else None  # (plans call it into their buffers)

    def step() -> None:
        env[out] = compute()
    return Lowered(step, op, out, dtype=ctx.dtype(out))


def _bounds(ctx: QCtx, q: QParams, slot: int | None = None) -> tuple[int, int]:
    """The node's int8 output bounds (narrowed by a clamp folded into ``slot``, if any)."""
    assert ctx.node is not None
    lo, hi = output_range(ctx.node)
    lo, hi = Q.output_bounds(lo, hi, float(q.scale), q.zero_point)
    if slot is not None and slot in ctx.fused:
        flo, fhi = ctx.fused[slot]
        lo, hi = max(lo, flo), min(hi, fhi)
    return lo, hi


_FOLDS_CLAMP = (x.XNNConv2d, x.XNNDepthwiseConv2d, x.XNNFullyConnected)


def fold_clamps(nodes: list[x.XNode], ctx: QCtx, external: set[int]
                ) -> tuple[dict[int, tuple[int, int]], set[int]]:
    """(``ctx.fused``, ``ctx.folded``) for the rules: fold each static int8 clamp (same parameters in and out) into the convolution or fully
    connected node that produces its input, when nothing else reads that value: the
    producer's requantization already clips, so clipping to the intersected bounds gives the
    same int8 values and saves a pass over the tensor (ExecuTorch's quantized graphs put a
    clamp after every ReLU6 convolution). ``external`` holds the graph's external slots."""
    fused: dict[int, tuple[int, int]] = {}
    folded: set[int] = set()
    uses: dict[int, int] = {}
    producer: dict[int, x.XNode] = {}
    for node in nodes:
        for v in _value_ids(node.xnode_union):
            uses[v] = uses.get(v, 0) + 1
        out = getattr(node.xnode_union, "output_id", None)
        if out is not None:
            producer[out] = node
    for node in nodes:
        u = node.xnode_union
        if not isinstance(u, x.XNNClamp) or uses.get(u.input_id) != 2:
            continue
        p = producer.get(u.input_id)
        si, so = ctx._slots.get(u.input_id), ctx._slots.get(u.output_id)
        if p is None or not isinstance(p.xnode_union, _FOLDS_CLAMP) or si is None or \
                so is None or si in external:
            continue
        sp = ctx._slots.get(p.xnode_union.input1_id)
        qi, qo, qp = ctx.quant(si), ctx.quant(so), None if sp is None else ctx.quant(sp)
        if qi is None or qo is None or qp is None or qp.dynamic or not qi.per_tensor or \
                not qi.same(qo) or qi.datatype != D.xnn_datatype_qint8:
            continue
        lo, hi = Q.output_bounds(*output_range(node), float(qo.scale), qo.zero_point)
        plo, phi = Q.output_bounds(*output_range(p), float(qi.scale), qi.zero_point)
        if max(lo, plo) > min(hi, phi):  # disjoint: clip(clip(v)) is not one clip
            continue
        fused[si] = (lo, hi)
        folded.add(si)
    return fused, folded


def _float_clamp(ctx: QCtx) -> Callable[[np.ndarray], np.ndarray]:
    assert ctx.node is not None
    lo, hi = output_range(ctx.node)
    if lo == -math.inf and hi == math.inf:
        return lambda r: r
    lo_, hi_ = np.float32(lo), np.float32(hi)
    return lambda r: np.clip(r, lo_, hi_, out=r)


@qrule(x.XNNConvert)
def _convert(n: x.XNNConvert, ctx: QCtx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    qi, qo = ctx.quant(i), ctx.quant(o)
    if qi is None and qo is not None and qo.dynamic:
        nnb = qo.num_nonbatch_dims
        first = ctx.dynamic_converts.setdefault((i, nnb), o)
        if first != o:  # values are never written in place: share the first one's result
            return (lambda: env[first]), o
        return (lambda: Q.quantize_dynamic(env[i], nnb)), o
    if qi is None and qo is not None:
        s, zp = float(ctx.static(o, "output").scale), qo.zero_point
        return Op(env, Q.Quantizer(s, zp), (i,)), o
    if qi is not None and qo is None:
        qi = ctx.static(i, "input")
        return Op(env, Q.Dequantizer(qi.scale, qi.zero_point, ctx.dtype(o)), (i,)), o
    a, b = ctx.static(i, "input"), ctx.static(o, "output")
    return (lambda: Q.quantize_reference(Q.dequantize(env[i], a.scale, a.zero_point),
                                         float(b.scale), b.zero_point)), o


def _weights(ctx: QCtx, f: int, axis: int, n_out: int, what: str = "filter"
             ) -> tuple[np.ndarray, np.ndarray, QParams]:
    """(centered float64 weights, float32 scale per output channel, params) of a constant
    quantized filter whose output channels lie along ``axis``."""
    w, q = ctx.const(f), ctx.quant(f)
    if w is None or q is None or q.dynamic:
        raise ctx.fail(f"{what} must be a constant quantized tensor")
    if q.group_size:
        raise ctx.fail(f"{what}: blockwise weights only work in a fully connected node")
    if not q.per_tensor and q.channel_dim != axis:
        raise ctx.fail(f"{what}: per-channel scales run along dim {q.channel_dim}, the output "
                       f"channels along dim {axis}")
    zp = q.zero_point if q.per_tensor else 0
    scale = np.broadcast_to(q.scale, (n_out,)).astype(np.float32)
    return np.subtract(w, zp, dtype=np.float64), scale, q  # one pass (exact: integers)


def _qbias(ctx: QCtx, bias_id: int, n_out: int, dynamic: bool) -> np.ndarray | None:
    b = _optional(ctx, bias_id, "bias")
    if b is None:
        return None
    v = ctx.const(b)
    if v is None:
        raise ctx.fail("a quantized node's bias must be a constant")
    if v.size != n_out:
        raise ctx.fail(f"bias has {v.size} values for {n_out} output channels")
    qb = ctx.quant(b)
    if dynamic:
        if qb is not None:
            raise ctx.fail("the bias of a dynamically quantized node must be fp32")
        return v.reshape(-1).astype(np.float32)
    if qb is None or qb.datatype not in (D.xnn_datatype_qint32, D.xnn_datatype_qcint32):
        raise ctx.fail("the bias of a statically quantized node must be qint32 / qcint32")
    return v.reshape(-1).astype(np.float64)


@qrule(x.XNNFullyConnected)
def _fully_connected(n: x.XNNFullyConnected, ctx: QCtx) -> tuple[Compute, int]:
    env, i = ctx.env, ctx.slot(n.input1_id, "input")
    f, o = ctx.slot(n.filter_id, "filter"), ctx.slot(n.output_id, "output")
    dims = ctx.dims(f)
    if len(dims) != 2:
        raise ctx.fail(f"filter must be 2-D, its dims are {list(dims)}")
    transposed = bool(n.flags & x.XNN_FLAG_TRANSPOSE_WEIGHTS)
    n_out = dims[1] if transposed else dims[0]
    flatten = bool(n.flags & x.XNN_FLAG_TENSORFLOW_RESHAPE_2D)
    qi, qf = ctx.quant(i), ctx.quant(f)
    if qi is not None and qi.dynamic:
        bias = _qbias(ctx, n.bias_id, n_out, True)
        clamp = _float_clamp(ctx)
        if qf is not None and qf.group_size:
            w, gs = ctx.const(f), qf.group_size
            assert w is not None
            if transposed:
                raise ctx.fail("blockwise int4 weights cannot be transposed")
            wb = QB.Blockwise(w, dims[0], dims[1], qf.scale, gs)  # packed tiles, once
            return (lambda: clamp(QB.dynamic_fc_blockwise(_flat(env[i], flatten, dims[1]), wb,
                                                         bias))), o
        wc, ws, _ = _weights(ctx, f, 1 if transposed else 0, n_out)
        w_t = wc if transposed else np.ascontiguousarray(wc.T)
        return (lambda: clamp(Q.dynamic_fc(_flat(env[i], flatten, w_t.shape[0]), w_t, ws,
                                           bias))), o
    qi, qo = ctx.static(i, "input"), ctx.static(o, "output")
    wc, ws, _ = _weights(ctx, f, 1 if transposed else 0, n_out)
    w_t = wc if transposed else np.ascontiguousarray(wc.T)
    bias = _qbias(ctx, n.bias_id, n_out, False)
    scale = Q.requant_scale(float(qi.scale), ws, float(qo.scale))
    lo, hi = _bounds(ctx, qo, o)
    izp, ozp = qi.zero_point, qo.zero_point
    bounds = Q.exact_splits(w_t, Q.input_absmax(izp), bias)
    w32, bias = np.ascontiguousarray(w_t, np.float32), _f32_bias(bias, bounds)
    fc = Q.StaticFC(w32, bias, bounds, scale, izp, ozp, lo, hi, flatten)
    return Op(env, fc, (i,)), o


def _f32_bias(bias: np.ndarray | None, bounds: list[int]) -> np.ndarray | None:
    """The int32 bias as the float32 GEMM path adds it (exact: :func:`Q.exact_splits`
    bounded it); kept in float64 for the split path, which sums in float64."""
    return bias if bias is None or len(bounds) > 2 else bias.astype(np.float32)


def _flat(v: Q.DynQ, flatten: bool, k: int) -> Q.DynQ:
    """XNN_FLAG_TENSORFLOW_RESHAPE_2D on a dynamically quantized input: ``[-1, K]`` rows, each
    keeping the scale and zero point of the token it came from."""
    if not flatten or v.q.ndim == 2:
        return v

    def per_row(a: np.ndarray) -> np.ndarray:
        a = a.reshape(a.shape + (1,) * v.num_nonbatch_dims)
        return np.broadcast_to(a, v.q.shape).reshape(-1, k)[:, 0].copy()
    qc = None if v.qc is None else v.qc.reshape(-1, k)
    return Q.DynQ(v.q.reshape(-1, k), per_row(v.scale), per_row(v.zero_point), 1, qc)


_CONV = {x.XNNConv2d: "conv", x.XNNDepthwiseConv2d: "dwconv", x.XNNConvTranspose2d: "deconv"}


@qrule(*_CONV)
def _conv(n: x.XNNNodeConv, ctx: QCtx) -> tuple[Compute, int]:
    kind = _CONV[type(n)]
    env, i = ctx.env, ctx.slot(n.input1_id, "input")
    f, o = ctx.slot(n.filter_id, "filter"), ctx.slot(n.output_id, "output")
    win = _conv_window(n, ctx, i)
    g = max(n.groups, 1)
    extra: tuple[int, ...] = ()
    if kind == "dwconv":
        if n.group_input_channels == 0 or n.group_output_channels % n.group_input_channels:
            raise ctx.fail(f"group channels {n.group_input_channels} -> "
                           f"{n.group_output_channels} do not give a depth multiplier")
        mult = n.group_output_channels // n.group_input_channels
        want, axis, extra = (1, win.kh, win.kw, n.groups * mult), 3, (mult,)
    else:
        want, axis = (g * n.group_output_channels, win.kh, win.kw, n.group_input_channels), 0
        if kind == "deconv":
            extra = (n.adjustment_height, n.adjustment_width)
    if ctx.dims(f) != want:
        raise ctx.fail(f"filter dims {list(ctx.dims(f))} do not match the node's {list(want)}")
    n_out = want[axis]
    wc, ws, _ = _weights(ctx, f, axis, n_out)
    w = nhwc.conv_filter_matrix(wc, g) if kind == "conv" else wc
    scratch = nhwc.Scratch()  # padded input, patch matrix, accumulators: reused per call
    qi = ctx.quant(i)
    if qi is not None and qi.dynamic:
        bias = _qbias(ctx, n.bias_id, n_out, True)
        clamp = _float_clamp(ctx)

        def dynamic():
            v: Q.DynQ = env[i]
            acc = Q.conv_acc(v.centered(), kind, w, win, g, extra, scratch)
            out = acc.astype(np.float32) * v.row_scale(4) * ws
            if bias is not None:
                out += bias
            return clamp(out)
        return dynamic, o
    qi, qo = ctx.static(i, "input"), ctx.static(o, "output")
    qbias = _qbias(ctx, n.bias_id, n_out, False)
    scale = Q.requant_scale(float(qi.scale), ws, float(qo.scale))
    lo, hi = _bounds(ctx, qo, o)
    izp, ozp = qi.zero_point, qo.zero_point

    bounds = None  # float32-exact chunks of the reduction (see Q.exact_splits)
    if kind == "conv":
        bounds = Q.exact_splits(w if g == 1 else w.transpose(1, 0, 2).reshape(w.shape[1], -1),
                                Q.input_absmax(izp), qbias)
    elif kind == "dwconv":
        bounds = Q.exact_splits(wc.reshape(-1, wc.shape[-1]), Q.input_absmax(izp), qbias)
    if bounds is not None and (len(bounds) == 2 or (kind == "conv" and g == 1)):
        w32, bias32 = w.astype(np.float32), _f32_bias(qbias, bounds)
        scale = np.ascontiguousarray(np.broadcast_to(scale, (n_out,)), np.float32)

        def conv(v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
            return Q.static_conv(v, izp, kind, w32, win, g, extra, bias32, bounds, scale,
                                 ozp, lo, hi, scratch, out)
        return Op(env, conv, (i,)), o  # (plans call it into their buffers)

    def static():  # float64 sums (transposed convolutions, huge grouped filters)
        acc = Q.conv_acc(env[i].astype(np.float64) - izp, kind, w, win, g, extra, scratch)
        if qbias is not None:
            acc += qbias
        return Q.requantize(acc, scale, ozp, lo, hi)
    return static, o


@qrule(x.XNNAdd, x.XNNSubtract, x.XNNMultiply)
def _binary(n: x.XNNNode2x1, ctx: QCtx) -> tuple[Compute, int]:
    env = ctx.env
    a, b, o = (ctx.slot(n.input1_id, "input1"), ctx.slot(n.input2_id, "input2"),
               ctx.slot(n.output_id, "output"))
    qa, qb, qo = ctx.static(a, "input1"), ctx.static(b, "input2"), ctx.static(o, "output")
    fn = Q.multiply if isinstance(n, x.XNNMultiply) else Q.add
    # XNNPACK has no int8 subtract kernel: it runs its add kernel with b's scale negated.
    b_scale = -float(qb.scale) if isinstance(n, x.XNNSubtract) else float(qb.scale)
    args = (float(qa.scale), qa.zero_point, b_scale, qb.zero_point,
            float(qo.scale), qo.zero_point)
    lo, hi = _bounds(ctx, qo)  # XNNPACK inserts a clamp node for a min/max
    if fn is Q.add:  # (plans call it into their buffers)
        return Op(env, Q.add, (a, b), (*args, lo, hi)), o
    return (lambda: np.clip(fn(env[a], env[b], *args), lo, hi)), o


@qrule(x.XNNMaxPooling2d)
def _max_pool(n: x.XNNMaxPooling2d, ctx: QCtx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    qi, qo = ctx.static(i, "input"), ctx.static(o, "output")
    if not qi.same(qo):
        raise ctx.fail("quantized max pooling needs equal input and output parameters")
    win = _pool_window(n, ctx, i)
    lo, hi = _bounds(ctx, qo)
    if (lo, hi) == (Q.QMIN, Q.QMAX):  # (the usual: no min/max) into the plan's buffer
        return Op(env, Q.max_pool2d, (i,), (win,)), o
    return (lambda: np.clip(Q.max_pool2d(env[i], win), lo, hi)), o


@qrule(x.XNNGlobalAvgPooling2d)
def _global_avg_pool(n: x.XNNGlobalAvgPooling2d, ctx: QCtx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    qi, qo = ctx.static(i, "input"), ctx.static(o, "output")
    rank = len(ctx.dims(i))
    if rank < 3:
        raise ctx.fail(f"input must be at least 3-D, its dims are {list(ctx.dims(i))}")
    axes, keep = tuple(range(1, rank - 1)), bool(n.flags & x.XNN_FLAG_KEEP_DIMS)
    args = (float(qi.scale), qi.zero_point, float(qo.scale), qo.zero_point, keep,
            *_bounds(ctx, qo))
    return (lambda: Q.mean(env[i], axes, *args)), o


@qrule(x.XNNClamp)
def _clamp(n: x.XNNClamp, ctx: QCtx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    qi, qo = ctx.static(i, "input"), ctx.static(o, "output")
    lo, hi = _bounds(ctx, qo)
    if i in ctx.folded:  # the producer clipped to these bounds already
        return (lambda: env[i]), o
    if qi.same(qo):
        scratch = nhwc.Scratch()  # the node's output buffer: no fresh pages per call

        def clamp():
            v = env[i]
            return np.clip(v, lo, hi, out=scratch.get("out", v.shape, v.dtype))
        return clamp, o
    return (lambda: np.clip(Q.quantize_reference(
        Q.dequantize(env[i], qi.scale, qi.zero_point), float(qo.scale), qo.zero_point),
        lo, hi)), o


_CAT = (x.XNNConcatenate2, x.XNNConcatenate3, x.XNNConcatenate4, x.XNNConcatenate5)


@qrule(*_CAT)
def _concat(n: x.XNNCat, ctx: QCtx) -> tuple[Compute, int]:
    """Inputs with other parameters than the output's are requantized first (XNNPACK's
    ExecuTorch graphs share one set of parameters, which makes this a copy)."""
    ids = (n.input1_id, n.input2_id, n.input3_id, n.input4_id, n.input5_id)
    ins = [ctx.slot(v, f"input{k + 1}") for k, v in enumerate(ids[: _CAT.index(type(n)) + 2])]
    o = ctx.slot(n.output_id, "output")
    qo = ctx.static(o, "output")
    qs = [ctx.static(s, "input") for s in ins]
    compute, out = NODE_RULES[type(n)](n, ctx)
    if all(q.same(qo) for q in qs):
        return compute, out
    env, axis = ctx.env, n.axis

    def requantized():
        parts = [env[s] if q.same(qo) else Q.quantize_reference(
            Q.dequantize(env[s], q.scale, q.zero_point), float(qo.scale), qo.zero_point)
            for s, q in zip(ins, qs)]
        return np.concatenate(parts, axis=axis)
    return requantized, out


@qrule(x.XNNStaticConstantPad)
def _pad(n: x.XNNStaticConstantPad, ctx: QCtx) -> tuple[Compute, int]:
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    qo = ctx.static(o, "output")
    rank = len(ctx.dims(i))
    if len(n.pre_paddings) < rank or len(n.post_paddings) < rank:
        raise ctx.fail("paddings do not cover the input's dimensions")
    widths = tuple(zip(n.pre_paddings[:rank], n.post_paddings[:rank]))
    value = Q.quantize(np.float32(n.padding_value), float(qo.scale), qo.zero_point)
    return (lambda: np.pad(env[i], widths, constant_values=value)), o


@qrule(*[c for c in _UNARY if c is not x.XNNCopy])
def _unary(n: x.XNNNode1x1, ctx: QCtx) -> tuple[Compute, int]:
    """XNNPACK's reference path for quantized unary ops: dequantize, apply, quantize."""
    env, i, o = ctx.env, ctx.slot(n.input_id, "input"), ctx.slot(n.output_id, "output")
    qi, qo = ctx.static(i, "input"), ctx.static(o, "output")
    fn = _UNARY[type(n)]

    def compute():
        with np.errstate(all="ignore"):
            v = fn(Q.dequantize(env[i], qi.scale, qi.zero_point))
        return Q.quantize_reference(v, float(qo.scale), qo.zero_point)
    return compute, o
