"""BatchNorm folded into the convolution before it, at ``load_method``, for ``.pte`` files built
elsewhere (edgetorch's compiler folds it ahead of time: ``exir/passes/fuse_batch_norm.py``).

An inference BatchNorm (``_native_batch_norm_legit_no_training``) right after a convolution
is an affine map per output channel, so it can ride on the convolution's weights
(``fold_conv_bn`` below, the arithmetic torch's ``fuse_conv_bn_eval`` does): the convolution
then writes the BatchNorm's output directly and the BatchNorm has nothing left to do. A
hardtanh (ReLU6) or relu reading the BatchNorm's output alone, right after it, rides along
(as XNNPACK fuses an output clamp into its convolution): the folded convolution clamps in its
epilogue, with the very bits of the folded convolution followed by the activation kernel.

The rule (:data:`RULE`) says which instructions; the engine (``patterns.py``) checks that the
convolution's result is read by the BatchNorm alone and by nothing sharing its bytes; the
builder checks the values: every parameter a constant of the program, the BatchNorm's
statistics outputs unread, static float32/float64 tensors. Folding changes rounding (like
ExecuTorch's folding pass): results agree within float tolerance, not bit for bit.

A convolution with no BatchNorm after it (edgetorch's own programs, folded ahead of time)
still takes the relu/hardtanh right after it into its epilogue (:func:`fuse_conv_activation`,
:data:`ACTIVATION_RULE`): the weights untouched, the bias added after the convolution's sums
(where the kernel's Winograd path adds it in its output transform: float32 rounding).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from ...kernels import accel
from ...kernels.conv.nchw import conv as conv_nd
from ...kernels.conv.nchw import conv_step, depthwise_clamped_step
from ...kernels.portable import norm_accel
from ...kernels.portable._util import expand_param
from ...kernels.registry import get_kernel
from ..file_pages import release_file_pages
from ..instructions import InstructionRecord
from .dataflow import Dataflow
from .patterns import Match, Pattern, Rule, apply
from .steps import Step, StepPlan

CONV = "aten::convolution.out"
BATCH_NORM = "aten::_native_batch_norm_legit_no_training.out"
HARDTANH = "aten::hardtanh.out"
ACTIVATIONS = {HARDTANH: 4, "aten::relu.out": 2}  # -> argument count, out included
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fold_conv_bn(w: np.ndarray, b: np.ndarray | None, mean: np.ndarray, var: np.ndarray,
                 eps: float, gamma: np.ndarray | None, beta: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(scale per output channel in w's dtype, shaped to multiply w; folded bias in float64)
    of ``bn(conv(x, w, b))``: ``w' = w * g``, ``b' = (b - mean) * g + beta`` with ``g = gamma
    / sqrt(var + eps)``. The factors in float64, rounded once; the weights are scaled in their
    own dtype (torch's ``fuse_conv_bn_weights`` scales in float32 too)."""
    g = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if gamma is not None:
        g = g * gamma
    b64 = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
    bias = (b64 - mean) * g + (0.0 if beta is None else beta)
    return g.astype(w.dtype).reshape((-1,) + (1,) * (w.ndim - 1)), bias


def _params_fixed(g: Dataflow, node: int) -> bool:
    rec = g.records[node]
    return len(rec.args) == 10 and not any(g.written(i) for i in rec.args[3:9])


def _is_activation(g: Dataflow, node: int, value: int) -> bool:
    rec = g.records[node]
    return ACTIVATIONS.get(rec.name) == len(rec.args) and rec.args[0] == value


RULE = Rule("conv_batch_norm",
            Pattern(BATCH_NORM, (Pattern(CONV, name="conv", test=_params_fixed),), name="bn",
                    test=lambda g, n: len(g.records[n].args) == 10),
            lambda g, m: _build(g, m), tail=_is_activation, max_tail=1)


def _has_tail(g: Dataflow, node: int) -> bool:
    return _params_fixed(g, node) and not g.values[g.records[node].args[6]]  # transposed?


ACTIVATION_RULE = Rule("conv_activation", Pattern(CONV, name="conv", test=_has_tail),
                       lambda g, m: _build_activation(g, m), tail=_is_activation, max_tail=1)


def fold_batch_norm(flow: Dataflow, plan: StepPlan) -> None:
    """Fold each inference BatchNorm (and a relu/hardtanh after it) into its convolution."""
    nodes = [r.index for r in flow.records if r.name == BATCH_NORM and not plan.replaced(r.index)]
    for _, m, (conv, fold) in apply(flow, [RULE], nodes):
        step = plan.build(fold)
        if step is None:
            continue
        plan.replace(conv, [step])
        for i in m.nodes:
            if i != conv:
                plan.replace(i, [])


def fuse_conv_activation(flow: Dataflow, plan: StepPlan) -> None:
    """Run the relu/hardtanh right after a convolution in the convolution's epilogue."""
    nodes = [r.index for r in flow.records if r.name == CONV and not plan.replaced(r.index)]
    for _, m, step in apply(flow, [ACTIVATION_RULE], nodes):
        plan.replace(m["conv"], [step])
        plan.replace(m.tail[0], [])


def _build_activation(flow: Dataflow, m: Match) -> Step | None:
    """The convolution writing the activation's output, clamping in its epilogue, or None
    (no activation after it, or values that do not fit)."""
    if not m.tail:
        return None
    conv = flow.records[m["conv"]]
    x_i, w_i, b_i, *params_i, y_i = conv.args
    vals = flow.values
    x, w, y = flow.array(x_i), flow.array(w_i), flow.array(y_i)
    b = None if vals[b_i] is None else flow.array(b_i)
    if x is None or w is None or y is None or (vals[b_i] is not None and b is None) or \
            not {x_i, w_i, y_i}.issubset(flow.fixed) or (b is not None and b_i not in flow.fixed):
        return None
    if w.ndim != 4 or x.dtype not in _FLOATS or {w.dtype, y.dtype} != {x.dtype} or \
            (b is not None and (b.dtype != x.dtype or b.shape != (w.shape[0],))):
        return None
    act = _activation(flow, conv, flow.records[m.tail[0]], y_i)
    if act is None or any(np.may_share_memory(act.out, a) for a in (w, b) if a is not None):
        return None
    # The activation's output may take the bytes of the convolution's input (dead after
    # it): the convolution then keeps writing its own result, which the epilogue reads
    # (the compiled depthwise loop clamps itself: it writes there only where it must).
    # (Not for a GEMM without bias nor NumPy's depthwise: nothing would be saved.)
    params = [vals[i] for i in params_i]
    via = y if np.may_share_memory(act.out, x) else None
    if via is not None and not y.flags.c_contiguous:
        return None
    return _with_activation(x, w, b, params, act, accel.available(), via)


class _Act(NamedTuple):
    """The activation a folded convolution also applies: clamp to [lo, hi] with hardtanh's
    (``np.clip``) or relu's (``np.maximum``) semantics, written into ``out``."""

    rec: InstructionRecord
    out: np.ndarray
    lo: float
    hi: float
    relu: bool


def _activation(flow: Dataflow, last: InstructionRecord, act: InstructionRecord, y: int
                ) -> _Act | None:
    """The activation, when it runs right after ``last`` (the BatchNorm, or the convolution:
    the convolution then writes the activation's memory earlier than the program did) and
    writes a static tensor of ``y``'s shape."""
    if act.index != last.index + 1:
        return None
    if act.name == HARDTANH:
        if flow.written(act.args[1]) or flow.written(act.args[2]):
            return None
        lo, hi = flow.values[act.args[1]], flow.values[act.args[2]]
        if type(lo) not in (int, float) or type(hi) not in (int, float) or not lo <= hi:
            return None
    else:
        lo, hi = 0, math.inf
    out, src = flow.array(act.args[-1]), flow.array(y)
    if act.args[-1] not in flow.fixed or out is None or src is None or out.shape != src.shape \
            or out.dtype != src.dtype or not out.flags.c_contiguous:
        return None
    return _Act(act, out, float(lo), float(hi), act.name != HARDTANH)


def _constant(flow: Dataflow, i: int) -> np.ndarray | None:
    v = flow.array(i)
    return v if v is not None and flow.constant(i) and v.dtype in _FLOATS else None


def _build(flow: Dataflow, m: Match) -> tuple[int, Callable[[], Step]] | None:
    """(the convolution's index, a function building its folded step), or None."""
    conv, bn = flow.records[m["conv"]], flow.records[m["bn"]]
    x_i, w_i, b_i, *params_i, y_i = conv.args  # y: the convolution's result
    _, g_i, beta_i, mean_i, var_i, _, eps_i, out_i, s1, s2 = bn.args
    if flow.read_by(s1) or flow.read_by(s2) or flow.written(eps_i):
        return None
    vals = flow.values
    x, out, w = flow.array(x_i), flow.array(out_i), _constant(flow, w_i)
    if vals[params_i[3]] or w is None or x_i not in flow.fixed or out_i not in flow.fixed:
        return None  # (transposed convolutions are left alone)
    mean, var = _constant(flow, mean_i), _constant(flow, var_i)
    if mean is None or var is None or x is None or out is None or x.dtype != w.dtype or \
            out.dtype != w.dtype:
        return None
    opt = {}
    for name, i in (("b", b_i), ("gamma", g_i), ("beta", beta_i)):
        opt[name] = None if vals[i] is None else _constant(flow, i)
        if vals[i] is not None and opt[name] is None:
            return None
    if any(a is not None and a.shape != (w.shape[0],) for a in (mean, var, *opt.values())):
        return None
    y = flow.array(y_i)
    if y is None or y.shape != out.shape:
        return None
    act = _activation(flow, bn, flow.records[m.tail[0]], out_i) if m.tail else None
    if m.tail and (act is None or np.may_share_memory(act.out, x) or w.ndim != 4):
        return None
    # the result (the BatchNorm's or the activation's) is now written at the convolution's
    # place: nothing in between may touch its bytes
    written = act.rec.args[-1] if act is not None else out_i
    if flow.touched(flow.between(conv.index, bn.index), flow.span(written)):
        return None
    scale, bias = fold_conv_bn(w, opt["b"], mean, var, float(vals[eps_i]), opt["gamma"],
                               opt["beta"])
    params = [vals[i] for i in params_i]
    shared = any(w_i in r.args for r in flow.records if r.index != conv.index)
    compiled = accel.available()  # decided at load, as the preparers do

    def build() -> Step:
        w2 = _frozen(w.shape, w.dtype, lambda a: np.multiply(w, scale, out=a))
        b2 = _frozen(bias.shape, w.dtype, lambda a: np.copyto(a, bias, casting="unsafe"))
        if not shared:
            release_file_pages(w)  # only the folded copy is read from now on
        if act is not None:
            return _with_activation(x, w2, b2, params, act, compiled)
        entry = get_kernel(CONV)
        args = [x, w2, b2, *params, out]
        steps = entry.prepare(*args) if entry.prepare is not None else None
        if steps is None:
            return partial(_call, entry.fn, args, out)
        return steps[0] if len(steps) == 1 else partial(_chain, list(steps))
    return conv.index, build


def _depthwise(w: np.ndarray, groups: int) -> bool:
    return w.shape[1] == 1 and groups > 1 and w.shape[0] == groups


def _with_activation(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, params: list[Any],
                     act: _Act, compiled: bool, via: np.ndarray | None = None) -> Step | None:
    """The (folded) convolution written straight into the activation's output, the clamp in
    its epilogue: the GEMM paths leave the bias to one compiled pass that adds it and clamps
    (the kernel adds it last too: the same bits); depthwise convolution adds the bias in its
    own loop, and the compiled one clamps there too, NumPy's in one in-place pass after. One
    pass over the activations less than convolution, then hardtanh (two with the compiled
    depthwise loop), and no BatchNorm-sized intermediate. ``via``: the convolution's own
    result, written there and read by the epilogue where the output shares the input's
    bytes; None (the fusion would save nothing) where that does not apply."""
    stride, padding, dilation = (expand_param(p, 2, n) for p, n in
                                 zip(params[:3], ("stride", "padding", "dilation")))
    groups, out = params[5], act.out
    dt = out.dtype.type
    if act.relu:
        clamp = partial(np.maximum, out, dt(0), out=out)
    else:
        clamp = partial(np.clip, out, dt(act.lo), dt(act.hi), out=out)
    if _depthwise(w, groups):
        step = depthwise_clamped_step(x, w, b, stride, padding, dilation, act.lo, act.hi, out,
                                      via) if compiled else None
        if step is not None or via is not None:
            return step
        return partial(_chain, [_conv(x, w, stride, padding, dilation, groups, b, out), clamp])
    if b is None:
        if via is not None:
            return None
        return partial(_chain, [_conv(x, w, stride, padding, dilation, groups, b, out), clamp])
    src = out if via is None else via
    conv = _conv(x, w, stride, padding, dilation, groups, None, src)
    if compiled:
        flat = out.reshape(out.shape[0], out.shape[1], -1)
        epilogue = [partial(norm_accel.channel_bias_clamp,
                            flat if via is None else via.reshape(flat.shape), flat, b,
                            dt(act.lo), dt(act.hi), act.relu)]
    else:
        epilogue = [partial(np.add, src, b.reshape(-1, 1, 1), out=out), clamp]
    return partial(_chain, [conv, *epilogue])


def _conv(x, w, stride, padding, dilation, groups, bias, out) -> Step:
    """The convolution into ``out`` as one step: its algorithm chosen now when the operands
    allow (``conv_step``), else per call."""
    step = conv_step(x, w, stride, padding, dilation, groups, bias, out)
    if step is not None:
        return step
    return partial(_conv_into, x, w, stride, padding, dilation, groups, bias, out)


def _conv_into(x, w, stride, padding, dilation, groups, bias, out) -> None:
    res = conv_nd(x, w, stride, padding, dilation, groups, bias, out)
    if res is not out:
        np.copyto(out, res)


def _chain(steps: list[Step]) -> None:
    for step in steps:
        step()


def _frozen(shape: tuple[int, ...], dtype: np.dtype,
            fill: Callable[[np.ndarray], Any]) -> np.ndarray:
    """A new constant: filled once, then read-only down to its memory (a read-only
    memoryview of a buffer nothing else holds), so kernels treat it as they treat the
    program's own constants (e.g. pack it once: ``winograd.constant_cache``)."""
    raw = bytearray(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    fill(np.frombuffer(raw, dtype).reshape(shape))
    return np.frombuffer(memoryview(raw).toreadonly(), dtype).reshape(shape)


def _call(fn: Callable[..., Any], args: list[Any], out: np.ndarray) -> None:
    res = fn(*args)
    if res is not out:
        np.copyto(out, res, casting="unsafe")
