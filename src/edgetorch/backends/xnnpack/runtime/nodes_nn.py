"""Rules for XNNPACK's GEMM, convolution, pooling and resize nodes (see ``nodes.py``).

Constant filters are rearranged once, at load, into the matrix the kernel multiplies by.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....kernels import blas_accel
from ....kernels.conv import nhwc
from ....kernels.conv.dispatch import Algorithm
from ....runtime.file_pages import release_file_pages
from .. import schema as x
from . import kernels as K
from .nodes import Compute, Ctx, Op, output_range, rule

F32 = np.dtype(np.float32)


def _optional(ctx: Ctx, value_id: int, what: str) -> int | None:
    return None if value_id == x.XNN_INVALID_VALUE_ID else ctx.slot(value_id, what)


def _prepared(ctx: Ctx, slot: int, prepare: Callable[[np.ndarray], Any]) -> Callable[[], Any]:
    """``prepare(value)``: computed once for a constant, on every call otherwise."""
    const = ctx.const(slot)
    env = ctx.env
    if const is not None:
        ready = prepare(const)
        return lambda: ready
    return lambda: prepare(env[slot])


# [O, K] filters up to this size are packed at load into the [K, O] matrix the GEMM reads
# fastest (a 32x64 @ 64x64 GEMM with a transposed operand takes ~2x as long in OpenBLAS).
# Larger ones stay views of the program's mapped data, multiplied transposed: a transformer
# of 86 MB would otherwise copy ~half its file at load (issue 12: RSS grows < 10% of the file).
PACK_MAX_BYTES = 1 << 18


def _pack(w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(w.T) if w.nbytes <= PACK_MAX_BYTES else w.T


def _bias(ctx: Ctx, bias_id: int) -> Callable[[], Any]:
    b = _optional(ctx, bias_id, "bias")
    if b is None:
        return lambda: None
    return _prepared(ctx, b, lambda v: v.reshape(-1))


@rule(x.XNNFullyConnected)
def _fully_connected(n: x.XNNFullyConnected, ctx: Ctx) -> tuple[Compute, int]:
    """``out[..., o] = sum_k in[..., k] * filter[o, k] + bias[o]``.

    The filter is ``[O, K]``, or ``[K, O]`` with XNN_FLAG_TRANSPOSE_WEIGHTS;
    XNN_FLAG_TENSORFLOW_RESHAPE_2D flattens the input to ``[-1, K]`` first.
    """
    env, i = ctx.env, ctx.slot(n.input1_id, "input")
    f = ctx.slot(n.filter_id, "filter")
    if len(ctx.dims(f)) != 2:
        raise ctx.fail(f"filter must be 2-D, its dims are {list(ctx.dims(f))}")
    transposed = bool(n.flags & x.XNN_FLAG_TRANSPOSE_WEIGHTS)
    k, o = ctx.dims(f)[::-1] if not transposed else ctx.dims(f)
    out_slot = ctx.slot(n.output_id, "output")
    in_dims, out_dims = ctx.dims(i), ctx.dims(out_slot)
    # As xnn_define_fully_connected: channels agree, so the result is the declared output's size.
    flatten = bool(n.flags & x.XNN_FLAG_TENSORFLOW_RESHAPE_2D)  # input viewed as [-1, k]
    if (in_dims and not flatten and in_dims[-1] != k) or (out_dims and out_dims[-1] != o):
        raise ctx.fail(f"input {list(in_dims)}, filter {list(ctx.dims(f))} and output "
                       f"{list(out_dims)} disagree on channels (in {k}, out {o})")
    weights = _prepared(ctx, f, (lambda v: v) if transposed else _pack)
    bias = _bias(ctx, n.bias_id)

    scratch = nhwc.Scratch()
    wc, bc = ctx.const(f), _optional(ctx, n.bias_id, "bias")
    if wc is not None and (bc is None or ctx.const(bc) is not None):
        # constant filter and bias: packed once; the compiled plan runs it into its buffer
        w, b = weights(), bias()
        blas = blas_accel.weights_layout(w, b)  # the compiled GEMM + bias reads them as they are
        if blas is not None and b is None:
            b = blas_accel.NO_BIAS
        return Op(env, _fc_into, (i,), (w, b, k if flatten else 0, blas), expand=(1,)), out_slot

    def compute():
        w = weights()
        v = env[i]
        if flatten:
            v = v.reshape(-1, w.shape[0])
        dt = w.dtype if v.dtype == w.dtype else np.result_type(v, w)
        out = scratch.get("out", v.shape[:-1] + w.shape[1:], dt)
        np.matmul(v, w, out)  # one GEMM into the node's own buffer
        b = bias()
        if b is not None:
            np.add(out, b, out)
        return out
    return compute, out_slot


def _fc_into(v: np.ndarray, w: np.ndarray, b: np.ndarray | None, k: int,
             blas: tuple[bool, int] | None = None, out: np.ndarray | None = None
             ) -> np.ndarray:
    """One GEMM (``[..., K] @ [K, O]``, the input flattened to ``[-1, k]`` when ``k``) and the
    bias added in place. A contiguous input of more than two dimensions is multiplied as one
    matrix of all its rows (np.matmul would make one GEMM per leading index).

    With ``blas`` (the weights' layout for ``blas_accel``; its bias is an array, empty for
    none) and numba, a float32 product is one compiled BLAS call that adds the bias too."""
    if blas is not None:
        if v.dtype is F32 and blas_accel.ready():
            if out is None:
                n = w.shape[1]
                out = np.empty(v.shape[:-1] + (n,) if not k else (v.size // k, n), F32)
            if out.dtype is F32 and blas_accel.run(v, w, b, out, bool(k), blas):
                return out
        if not b.size:
            b = None
    if k:
        v = v.reshape(-1, k)
    elif v.ndim > 2 and v.flags.c_contiguous and (out is None or out.flags.c_contiguous):
        shape = v.shape[:-1] + w.shape[1:]
        rows = np.matmul(v.reshape(-1, v.shape[-1]), w,
                         None if out is None else out.reshape(-1, w.shape[1]))
        out = rows.reshape(shape) if out is None else out
    else:
        out = np.matmul(v, w, out)
    if b is not None:
        np.add(out, b, out)
    return out


def _bmm_t(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.matmul(a, np.swapaxes(b, -1, -2), out)


@rule(x.XNNBatchMatrixMultiply)
def _bmm(n: x.XNNBatchMatrixMultiply, ctx: Ctx) -> tuple[Compute, int]:
    """``[..., M, K] @ [..., K, N]`` (input2 is ``[..., N, K]`` with XNN_FLAG_TRANSPOSE_B)."""
    a, b = ctx.slot(n.input1_id, "input1"), ctx.slot(n.input2_id, "input2")
    o = ctx.slot(n.output_id, "output")
    transposed = bool(n.flags & x.XNN_FLAG_TRANSPOSE_B)
    const = ctx.const(b)
    if const is not None:
        rhs = np.swapaxes(const, -1, -2) if transposed else const
        return Op(ctx.env, np.matmul, (a,), (rhs,)), o
    return Op(ctx.env, _bmm_t if transposed else np.matmul, (a, b)), o


def _window(n: Any, ctx: Ctx, i: int, kh: int, kw: int, sh: int, sw: int, dh: int,
            dw: int) -> nhwc.Window:
    win = nhwc.Window(kh, kw, max(sh, 1), max(sw, 1), max(dh, 1), max(dw, 1),
                   n.padding_top, n.padding_right, n.padding_bottom, n.padding_left)
    dims = ctx.dims(i)
    if len(dims) != 4:
        raise ctx.fail(f"input must be 4-D NHWC, its dims are {list(dims)}")
    if kh <= 0 or kw <= 0:
        raise ctx.fail(f"window {kh}x{kw} is empty")
    if n.flags & x.XNN_FLAG_TENSORFLOW_SAME_PADDING:
        win = win.same_padded(dims[1], dims[2])
    return win


def _conv_window(n: x.XNNNodeConv, ctx: Ctx, i: int) -> nhwc.Window:
    return _window(n, ctx, i, n.kernel_height, n.kernel_width, n.subsampling_height,
                   n.subsampling_width, n.dilation_height, n.dilation_width)


def _check_filter(ctx: Ctx, f: int, want: tuple[int, ...]) -> None:
    if ctx.dims(f) != want:
        raise ctx.fail(f"filter dims {list(ctx.dims(f))} do not match the node's "
                       f"{list(want)}")


def _scratch(ctx: Ctx, out: int) -> nhwc.Scratch:
    """A node's buffers, its output placed in the graph's arena when ``arena`` planned
    it (``plan_outputs`` ran on the graph before its nodes were lowered)."""
    flat = ctx.out_plan.get(out)
    return nhwc.Scratch(None if flat is None else {"out": flat})


def _workspace(ctx: Ctx) -> nhwc.Workspace:
    """The temporaries' memory shared by the convolutions of the graph ``ctx`` compiles."""
    if ctx.conv_workspace is None:
        ctx.conv_workspace = nhwc.Workspace()
    return ctx.conv_workspace


@rule(x.XNNConv2d)
def _conv2d(n: x.XNNConv2d, ctx: Ctx) -> tuple[Compute, int]:
    env, i = ctx.env, ctx.slot(n.input1_id, "input")
    f = ctx.slot(n.filter_id, "filter")
    win = _conv_window(n, ctx, i)
    g = max(n.groups, 1)
    _check_filter(ctx, f, (g * n.group_output_channels, win.kh, win.kw,
                           n.group_input_channels))
    bias = _bias(ctx, n.bias_id)
    o = ctx.slot(n.output_id, "output")
    scratch = _scratch(ctx, o)
    lo, hi = _fused_clamp(ctx, i, f, o)
    work = _workspace(ctx)
    const = ctx.const(f)
    algorithm = nhwc.choose(win, g, n.group_input_channels, n.group_output_channels,
                            ctx.dims(i), const is not None)
    if const is not None and algorithm is Algorithm.WINOGRAD:
        u = nhwc.winograd_filter(const)  # packed once, at delegate init
        compute = lambda: nhwc.conv2d_winograd(env[i], u, bias(), win, scratch, lo, hi, work)  # noqa: E731
    else:
        wmat = _prepared(ctx, f, lambda v: nhwc.conv_filter_matrix(v, g))
        compute = lambda: nhwc.conv2d(env[i], wmat(), bias(), win, g, scratch, lo, hi, work)  # noqa: E731
    if const is not None:
        release_file_pages(const)  # only the packed copy is read from now on
    return compute, o


def _fused_clamp(ctx: Ctx, i: int, f: int, o: int) -> tuple[float, float]:
    """The node's output clamp, for its kernel to apply in its epilogue (one pass less than
    ``lower``'s separate clamp) when input, filter and output share a dtype."""
    if ctx.dtype(o) == ctx.dtype(i) == ctx.dtype(f):
        ctx.clamp_fused = True
        return output_range(ctx.node)
    return -math.inf, math.inf


@rule(x.XNNDepthwiseConv2d)
def _depthwise_conv2d(n: x.XNNDepthwiseConv2d, ctx: Ctx) -> tuple[Compute, int]:
    """``groups`` input channels, ``group_output_channels / group_input_channels`` each."""
    env, i = ctx.env, ctx.slot(n.input1_id, "input")
    f = ctx.slot(n.filter_id, "filter")
    win = _conv_window(n, ctx, i)
    if n.group_input_channels == 0 or n.group_output_channels % n.group_input_channels:
        raise ctx.fail(f"group channels {n.group_input_channels} -> "
                       f"{n.group_output_channels} do not give a depth multiplier")
    mult = n.group_output_channels // n.group_input_channels
    _check_filter(ctx, f, (1, win.kh, win.kw, n.groups * mult))
    filt = _prepared(ctx, f, lambda v: v)
    bias = _bias(ctx, n.bias_id)
    const = ctx.const(f) is not None
    o = ctx.slot(n.output_id, "output")
    scratch = _scratch(ctx, o)
    lo, hi = _fused_clamp(ctx, i, f, o)
    return ((lambda: nhwc.depthwise_conv2d(env[i], filt(), bias(), win, mult, scratch, const,
                                        lo, hi)), o)


@rule(x.XNNConvTranspose2d)
def _deconv2d(n: x.XNNConvTranspose2d, ctx: Ctx) -> tuple[Compute, int]:
    env, i = ctx.env, ctx.slot(n.input1_id, "input")
    f = ctx.slot(n.filter_id, "filter")
    win = _conv_window(n, ctx, i)
    g = max(n.groups, 1)
    _check_filter(ctx, f, (g * n.group_output_channels, win.kh, win.kw,
                           n.group_input_channels))
    filt = _prepared(ctx, f, lambda v: v)
    bias = _bias(ctx, n.bias_id)
    ah, aw = n.adjustment_height, n.adjustment_width
    return ((lambda: nhwc.deconv2d(env[i], filt(), bias(), win, g, ah, aw)),
            ctx.slot(n.output_id, "output"))


def _pool_window(n: x.XNNPooling2D, ctx: Ctx, i: int) -> nhwc.Window:
    return _window(n, ctx, i, n.pooling_height, n.pooling_width, n.stride_height,
                   n.stride_width, n.dilation_height, n.dilation_width)


@rule(x.XNNMaxPooling2d)
def _max_pool2d(n: x.XNNMaxPooling2d, ctx: Ctx) -> tuple[Compute, int]:
    env, i = ctx.env, ctx.slot(n.input_id, "input")
    win = _pool_window(n, ctx, i)
    o = ctx.slot(n.output_id, "output")
    scratch = _scratch(ctx, o)
    return (lambda: K.max_pool2d(env[i], win, scratch)), o


@rule(x.XNNAvgPooling2d)
def _avg_pool2d(n: x.XNNAvgPooling2d, ctx: Ctx) -> tuple[Compute, int]:
    env, i = ctx.env, ctx.slot(n.input_id, "input")
    win = _pool_window(n, ctx, i)
    scratch = nhwc.Scratch()
    return (lambda: K.avg_pool2d(env[i], win, scratch)), ctx.slot(n.output_id, "output")


@rule(x.XNNGlobalAvgPooling2d)
def _global_avg_pool2d(n: x.XNNGlobalAvgPooling2d, ctx: Ctx) -> tuple[Compute, int]:
    """Mean over H and W of ``[N, H, W, C]``; XNN_FLAG_KEEP_DIMS keeps them as 1s."""
    env, i = ctx.env, ctx.slot(n.input_id, "input")
    rank = len(ctx.dims(i))
    if rank < 3:
        raise ctx.fail(f"input must be at least 3-D, its dims are {list(ctx.dims(i))}")
    axes = tuple(range(1, rank - 1))
    keep = bool(n.flags & x.XNN_FLAG_KEEP_DIMS)
    return (lambda: np.mean(env[i], axis=axes, keepdims=keep)), ctx.slot(n.output_id, "output")


@rule(x.XNNStaticResizeBilinear2D)
def _resize_bilinear(n: x.XNNStaticResizeBilinear2D, ctx: Ctx) -> tuple[Compute, int]:
    env, i = ctx.env, ctx.slot(n.input_id, "input")
    if len(ctx.dims(i)) != 4:
        raise ctx.fail(f"input must be 4-D NHWC, its dims are {list(ctx.dims(i))}")
    if n.new_height == 0 or n.new_width == 0:
        raise ctx.fail(f"new size {n.new_height}x{n.new_width} is empty")
    if n.flags & ~x.XNN_FLAG_ALIGN_CORNERS:
        raise ctx.fail(f"flags {n.flags:#x} are not supported (only XNN_FLAG_ALIGN_CORNERS)")
    h, w, corners = n.new_height, n.new_width, bool(n.flags & x.XNN_FLAG_ALIGN_CORNERS)
    return ((lambda: K.resize_bilinear2d(env[i], h, w, corners)),
            ctx.slot(n.output_id, "output"))


@rule(x.XNNArgMaxPooling2d)
def _argmax_pool2d(n: x.XNNArgMaxPooling2d, ctx: Ctx) -> tuple[Compute, int]:
    """Writes the index output itself and returns the values (its ``output_value_id``)."""
    env, i = ctx.env, ctx.slot(n.input_id, "input")
    win = _window(n, ctx, i, n.pooling_height, n.pooling_width, n.pooling_height,
                  n.pooling_width, 1, 1)
    idx_slot = ctx.slot(n.output_index_id, "index output")

    def compute():
        values, index = K.argmax_pool2d(env[i], win)
        env[idx_slot] = index
        return values
    return compute, ctx.slot(n.output_value_id, "value output")
