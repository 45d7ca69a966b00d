"""Convolution in torch's layout (NCHW, any number of spatial dimensions): the portable
``convolution`` kernel's algorithms, chosen by ``dispatch.choose``.

Forward convolution writes one BLAS GEMM straight into ``out`` (``W @ cols``), the patch
matrix made by one strided copy into a reused buffer (the input itself for 1x1); 3x3
stride-1 convolutions with enough channels go through Winograd F(2x2, 3x3) (``winograd.py``,
constant filters transformed once); depthwise convolution accumulates taps on flattened
planes, channels-last on small planes, or in one compiled loop (``compiled.py``). Padding
goes into persistent zero-bordered buffers. Transposed convolution multiplies first and
scatters the taps back (col2im).
"""

from __future__ import annotations

import itertools
import math
import threading
from functools import partial

import numpy as np

from ..portable._util import invalid, is_float, windows
from . import compiled, dispatch, winograd
from .dispatch import Algorithm, ConvShape


def _tap(t, d, o, s):
    return slice(t * d, t * d + (o - 1) * s + 1, s)


class _Scratch(threading.local):
    """Work buffers shared by every convolution call of this thread: zero-bordered padded
    inputs (keyed by shape and padding, so a border is written once and only the interior is
    copied per call), im2col matrices and depthwise temporaries. A call consumes them before
    returning, so sharing across call sites is safe; per thread, so concurrent methods are."""

    MAX_BUFFERS = 64

    def __init__(self) -> None:
        # oldest first: a full cache drops its oldest buffer, so what a method made at load
        # survives the loads and calls of other methods in between (until 64 newer ones came)
        self.bufs: dict[tuple, np.ndarray] = {}
        # what made its buffers at load (_winograd_ready); forgotten whenever a buffer is
        # dropped, so a key here means its buffers are all still here
        self.prepared: set[tuple] = set()

    def first_time(self, key: tuple) -> bool:
        """True the first time ``key`` comes (since a buffer was last dropped)."""
        if key in self.prepared:
            return False
        if len(self.prepared) >= self.MAX_BUFFERS:
            self.prepared.clear()
        self.prepared.add(key)
        return True

    def get(self, key: tuple, shape: tuple[int, ...], dtype: np.dtype,
            zero: bool = False) -> np.ndarray:
        key = (key, shape, dtype)
        buf = self.bufs.get(key)
        if buf is None:
            if len(self.bufs) >= self.MAX_BUFFERS:
                del self.bufs[next(iter(self.bufs))]
                self.prepared.clear()
            buf = self.bufs[key] = np.zeros(shape, dtype) if zero else np.empty(shape, dtype)
        return buf


_SCRATCH = _Scratch()


def _pad_into(x, padding):
    """``x`` (N, C, *spatial) inside a persistent zero border of ``padding``."""
    if not any(padding):
        return x
    shape = x.shape[:2] + tuple(n + 2 * p for n, p in zip(x.shape[2:], padding))
    buf = _SCRATCH.get(("pad", tuple(padding)), shape, x.dtype, zero=True)
    buf[(slice(None),) * 2 + tuple(slice(p, p + n) for p, n in zip(padding, x.shape[2:]))] = x
    return buf


def conv(x, w, stride, padding, dilation, groups, bias=None, out=None):
    """Forward convolution of (N, C, *spatial) by (Cout, C/G, *K), NCHW throughout.

    One GEMM ``W (G, Og, Cg*KK) @ cols (N, G, Cg*KK, P)`` whose result is already the
    (N, Cout, *out) layout, written straight into ``out`` when it fits; the patch matrix
    is one strided copy into a reused buffer (a 1x1 stride-1 convolution multiplies the input
    itself). Depthwise convolution accumulates taps into the output buffer instead."""
    dst, run = plan(x, w, stride, padding, dilation, groups, bias, out)
    run()
    return dst


def conv_step(x, w, stride, padding, dilation, groups, bias, out):
    """The convolution of tensors that keep their memory and sizes across calls (a load
    pass's fixed values) as one step writing ``out``, its algorithm, views and checks done
    now, with the very operations of :func:`conv`; None when ``out`` would not take the
    result directly or an operand would not be a view (then :func:`conv` runs per call)."""
    ops = (x, w, out) if bias is None else (x, w, out, bias)
    if not all(a.flags.c_contiguous and a.dtype == x.dtype for a in ops):
        return None
    dst, run = plan(x, w, stride, padding, dilation, groups, bias, out, at_load=True)
    return run if dst is out else None


def plan(x, w, stride, padding, dilation, groups, bias=None, out=None, at_load=False):
    """``(dst, run)``: ``run()`` computes the convolution of the current values of ``x`` and
    ``w`` into ``dst`` (``out`` when it fits, else a new array); the algorithm
    (``dispatch.choose_nchw``) and the views are chosen here, from the sizes. ``at_load``:
    what the first ``run()`` would do once is done now (Winograd: :func:`_winograd_ready`)."""
    N, C = x.shape[:2]
    Cout, Cg = w.shape[:2]
    K = w.shape[2:]
    nsp = len(K)
    G = groups
    if C != Cg * G or Cout % G:
        raise invalid(
            f"convolution: input has {C} channels but weight {list(w.shape)} with groups={G} "
            f"expects {Cg * G}"
        )
    out_size = [
        (n + 2 * p - d * (k - 1) - 1) // s + 1
        for n, k, s, d, p in zip(x.shape[2:], K, stride, dilation, padding)
    ]
    if any(o <= 0 for o in out_size):
        raise invalid(f"convolution: output size {out_size} is too small (input "
                      f"{list(x.shape)}, padding {list(padding)})")
    shape = (N, Cout, *out_size)
    dst = out if (out is not None and out.shape == shape and out.dtype == x.dtype
                  and out.flags.c_contiguous and not np.may_share_memory(out, x)) \
        else np.empty(shape, x.dtype)
    Og, P, KK = Cout // G, math.prod(out_size), math.prod(K)
    algorithm = dispatch.choose_nchw(ConvShape(
        tuple(K), tuple(stride), tuple(dilation), G, C, Cout, N, x.shape[2:], tuple(out_size),
        nsp == 2 and G == C == Cout and compiled.usable(x, w, dst)
        and (bias is None or bias.dtype == x.dtype), is_float(x.dtype)))
    if algorithm is Algorithm.WINOGRAD:
        run = partial(_conv_winograd, x, w, padding, out_size, dst)
        if at_load:
            _winograd_ready(x, w, padding, out_size)
    elif algorithm is Algorithm.DEPTHWISE_COMPILED:  # (the bias is added by the loop)
        return dst, partial(_depthwise_accel, x, w.reshape(C, *K), bias, stride, dilation,
                            padding, out_size, dst)
    elif algorithm is Algorithm.DEPTHWISE_CHANNELS_LAST:
        run = partial(_depthwise_nhwc, x, w.reshape(C, KK), K, stride, dilation, padding,
                      out_size, dst)
    elif algorithm is Algorithm.DEPTHWISE_TAPS:
        run = partial(_depthwise_padded, x, padding, w.reshape(C, KK), K, stride, dilation,
                      out_size, dst)
    elif KK == 1 and not any(padding) and all(s == 1 for s in stride):
        # the input itself is the patch matrix (a view when x is contiguous)
        run = partial(np.matmul, w.reshape(G, Og, Cg), x.reshape(N, G, Cg, P),
                      out=dst.reshape(N, G, Og, P))
    else:
        run = partial(_im2col_gemm, x, w.reshape(G, Og, Cg * KK), K, stride, padding,
                      dilation, out_size, dst.reshape(N, G, Og, P))
        if at_load:  # (the padded input and patch matrix: this thread's work memory)
            _patch_matrix(*run.args[:-1], run.args[-1].shape)
    if bias is not None:
        b = bias.astype(x.dtype, copy=False).reshape((-1,) + (1,) * nsp)
        run = partial(_then_add, run, dst, b)
    return dst, run


def _then_add(run, dst, b):
    run()
    np.add(dst, b, out=dst)


def _im2col_gemm(x, wm, K, stride, padding, dilation, out_size, res):
    """``res`` (N, G, Og, P) = ``wm`` (G, Og, Cg*KK) @ the patch matrix of ``x``, made by
    one strided copy into a reused buffer."""
    np.matmul(wm, _patch_matrix(x, wm, K, stride, padding, dilation, out_size, res.shape),
              out=res)


def _patch_matrix(x, wm, K, stride, padding, dilation, out_size, res_shape):
    N, C = x.shape[:2]
    nsp = len(K)
    xp = _pad_into(x, padding)
    cols = _SCRATCH.get("cols", (N, wm.shape[0], wm.shape[2], res_shape[3]), x.dtype)
    v = windows(xp, K, stride, dilation, out_size)  # (N, C, *out, *K)
    order = (0, 1) + tuple(range(2 + nsp, 2 + 2 * nsp)) + tuple(range(2, 2 + nsp))
    np.copyto(cols.reshape((N, C) + tuple(K) + tuple(out_size)), v.transpose(order))
    return cols


def _conv_winograd(x, w, padding, out_size, dst):
    """3x3 stride-1 convolution by Winograd F(2x2, 3x3) in NHWC: the transposing copy into
    the zero-bordered buffer replaces im2col's 9x patch matrix, one transposing copy out."""
    H, W = x.shape[2:]
    xb, u = _winograd_operands(x, w, padding, out_size)
    xb[:, padding[0] : padding[0] + H, padding[1] : padding[1] + W] = x.transpose(0, 2, 3, 1)
    res = winograd.conv_nhwc(xb, u, _scratch)
    np.copyto(dst, res[:, :out_size[0], :out_size[1]].transpose(0, 3, 1, 2))


def _winograd_ready(x, w, padding, out_size):
    """At load, what a Winograd convolution's first call would do first (0.7 ms of a 2 ms
    call for a small CNN, and a megabyte of new pages): the filter transformed (kept for the
    constant filter) and, the first time this thread meets the input's geometry, its work
    buffers allocated and written -- by the transforms and GEMMs run on the zero-bordered
    buffer as it is, into work memory only: no tensor of the program is read or written, and
    each call writes every work buffer before reading it."""
    xb, u = _winograd_operands(x, w, padding, out_size)
    # (the buffers follow from the input's geometry, the filter's and the path taken)
    if _SCRATCH.first_time((*_winograd_input(x, padding, out_size), u.shape,
                            compiled.usable(xb, u))):
        winograd.conv_nhwc(xb, u, _scratch)


def _winograd_input(x, padding, out_size):
    """The scratch key, shape and dtype of a Winograd convolution's zero-bordered input."""
    N, C = x.shape[:2]
    th, tw = winograd.tiles(*out_size)
    return ("wino_pad", tuple(padding)), (N, 2 * th + 2, 2 * tw + 2, C), x.dtype


def _winograd_operands(x, w, padding, out_size):
    """This thread's zero-bordered NHWC input buffer and the transformed filter (computed
    once per constant filter) of a Winograd convolution."""
    xb = _SCRATCH.get(*_winograd_input(x, padding, out_size), zero=True)
    u = winograd.constant_cache(
        w, "winograd", lambda a: winograd.transform_filter(a.transpose(0, 2, 3, 1)))
    return xb, u


def _scratch(role, shape, dtype):
    return _SCRATCH.get(role, shape, dtype)


def _depthwise_padded(x, padding, wk, K, stride, dilation, out_size, acc):
    _depthwise(_pad_into(x, padding), wk, K, stride, dilation, out_size, acc)


def _depthwise(xp, wk, K, stride, dilation, out_size, acc):
    """acc (N, C, *out) = sum over taps of tap * w[c, tap], one multiply and add per tap."""
    if len(K) == 2 and (stride[0] == stride[1] == 1 or dilation[0] == dilation[1] == 1):
        _depthwise_flat(xp, wk, K, stride, dilation, out_size, acc)
        return
    tmp = _SCRATCH.get("dw_tmp", acc.shape, acc.dtype)
    bshape = (-1,) + (1,) * len(K)
    for t, taps in enumerate(itertools.product(*(range(k) for k in K))):
        sl = (slice(None), slice(None))
        sl += tuple(_tap(k, d, o, s) for k, d, o, s in zip(taps, dilation, out_size, stride))
        wt = wk[:, t].reshape(bshape)
        if t == 0:
            np.multiply(xp[sl], wt, out=acc)
        else:
            np.multiply(xp[sl], wt, out=tmp)
            np.add(acc, tmp, out=acc)


def flat_taps(xp, K, stride, dilation, out_size):
    """The taps of a 2-D window over ``xp`` (N, C, Hp, Wp) as contiguous runs of flattened
    planes: returns ``(Wq, L, taps)`` with ``taps[t]`` the (N, C, L) run of tap t; output
    (r, c) is element ``r*Wq + c`` of a run (columns c >= OW are junk, to be dropped).

    At stride 1 with row width Wq, tap (i, j) of output (r, c) is plane element
    ``(r + i*dh)*Wq + c + j*dw``, so every tap is ONE contiguous run per channel: NumPy
    streams whole planes instead of OW-long strided rows (an order of magnitude faster for
    comparisons, ~3x for multiply-adds). At stride s (dilation 1) the input is first split
    into its s*s phases ``xp[a::s, b::s]`` (one copy), in which the taps are stride-1 taps."""
    N, C, Hp, Wp = xp.shape
    OH, OW = out_size
    sh, sw = stride
    dh, dw = dilation
    if sh == sw == 1:
        Hq, Wq = Hp, Wp
        phases = np.ascontiguousarray(xp).reshape(1, 1, N, C, Hp * Wp)
    else:
        if dh != 1 or dw != 1:
            raise ValueError("flat_taps: strided windows need dilation 1")
        Hq, Wq = -(-Hp // sh), -(-Wp // sw)
        ph = _SCRATCH.get(("phases", Hp, Wp), (sh, sw, N, C, Hq, Wq), xp.dtype, zero=True)
        for a in range(sh):
            for b in range(sw):
                part = xp[:, :, a::sh, b::sw]
                ph[a, b, :, :, : part.shape[2], : part.shape[3]] = part
        phases = ph.reshape(sh, sw, N, C, Hq * Wq)
    L = (OH - 1) * Wq + OW  # up to the last valid output of the last row
    taps = []
    for i, j in itertools.product(range(K[0]), range(K[1])):
        i, j = i * dh, j * dw
        off = (i // sh) * Wq + j // sw
        taps.append(phases[i % sh, j % sw, :, :, off : off + L])
    return Wq, L, taps


def flat_result(role, shape, Wq, L, dtype):
    """A reused (N, C, OH*Wq) buffer and its (N, C, L) prefix that flat runs are computed
    into; :func:`flat_crop` then copies the valid columns out in one pass."""
    N, C, OH = shape
    full = _SCRATCH.get(role, (N, C, OH * Wq), dtype)
    return full, full[:, :, :L]


def flat_crop(full, Wq, out_size, dst):
    """Copy the valid columns of a flat (N, C, OH*Wq) result into ``dst`` (N, C, OH, OW)."""
    OH, OW = out_size
    np.copyto(dst, full.reshape(full.shape[:2] + (OH, Wq))[:, :, :, :OW], casting="unsafe")


def _depthwise_flat(xp, wk, K, stride, dilation, out_size, acc):
    """Stride-1 or dilation-1 2-D depthwise, taps from :func:`flat_taps`."""
    Wq, L, taps = flat_taps(xp, K, stride, dilation, out_size)
    N, C = xp.shape[:2]
    full, run = flat_result("dw_run", (N, C, out_size[0]), Wq, L, acc.dtype)
    # Large layers go in blocks of channels that stay in cache across the taps' passes.
    t = dispatch.THRESHOLDS
    block = C if N * C * L <= t.depthwise_whole_max else max(1, t.depthwise_block // (N * L))
    tmp = _SCRATCH.get("dw_flat_tmp", (N, min(block, C), L), acc.dtype)
    for c0 in range(0, C, block):
        c1 = min(C, c0 + block)
        r, tm = run[:, c0:c1], tmp[:, : c1 - c0]
        for t, src in enumerate(taps):
            wt = wk[c0:c1, t].reshape(-1, 1)
            if t == 0:
                np.multiply(src[:, c0:c1], wt, out=r)
            else:
                np.multiply(src[:, c0:c1], wt, out=tm)
                np.add(r, tm, out=r)
    flat_crop(full, Wq, out_size, acc)


def _depthwise_nhwc(x, wk, K, stride, dilation, padding, out_size, acc):
    """2-D depthwise on small planes (MobileNetV2's 28x28 down to 7x7, 192-960 channels) in
    channels-last order: each tap is then a view of long contiguous (OW*C) rows times the
    filter tiled along a row, where per-channel planes give NumPy inner loops of a few
    dozen elements; with the two transposing copies it is still ~2-2.7x faster. Larger
    planes keep :func:`_depthwise_flat` (their transposes cost more than they save)."""
    N, C, H, W = x.shape
    OH, OW = out_size
    ph, pw = padding
    xh = _SCRATCH.get(("dw_nhwc_pad", ph, pw), (N, H + 2 * ph, W + 2 * pw, C), x.dtype,
                      zero=True)
    xh[:, ph : ph + H, pw : pw + W] = x.transpose(0, 2, 3, 1)
    tiled = np.ascontiguousarray(np.broadcast_to(wk.T[:, None, :], (wk.shape[1], OW, C)))
    res = _SCRATCH.get("dw_nhwc_acc", (N, OH, OW, C), acc.dtype)
    tmp = _SCRATCH.get("dw_nhwc_tmp", (N, OH, OW, C), acc.dtype)
    for t, (i, j) in enumerate(itertools.product(range(K[0]), range(K[1]))):
        tap = xh[:, _tap(i, dilation[0], OH, stride[0]), _tap(j, dilation[1], OW, stride[1])]
        if t == 0:
            np.multiply(tap, tiled[t], out=res)
        else:
            np.multiply(tap, tiled[t], out=tmp)
            np.add(res, tmp, out=res)
    np.copyto(acc, res.transpose(0, 3, 1, 2))


def _depthwise_accel(x, w, bias, stride, dilation, padding, out_size, dst, lo=-np.inf,
                     hi=np.inf):
    """2-D depthwise with the ``accel`` extra: large planes at stride 1 in NCHW, the rest
    channels-last between two transposing copies (as :func:`_depthwise_nhwc`; measured on
    MobileNetV2's layers, each where it is faster); clamped to [lo, hi] in the loop."""
    N, C, H, W = x.shape
    if not dispatch.compiled_depthwise_channels_last(H * W, stride[1]):
        compiled.depthwise_nchw(x, w, bias, dst, padding, stride, dilation, lo, hi)
        return
    xh = _SCRATCH.get("dw_accel_in", (N, H, W, C), x.dtype)
    np.copyto(xh, x.transpose(0, 2, 3, 1))
    res = _SCRATCH.get("dw_accel_out", (N, *out_size, C), x.dtype)
    compiled.depthwise_nhwc(xh, w.transpose(1, 2, 0), bias, res, padding, stride, dilation,
                            lo, hi)
    np.copyto(dst, res.transpose(0, 3, 1, 2))


def depthwise_clamped_step(x, w, bias, stride, padding, dilation, lo, hi, out, spare):
    """A 2-D depthwise convolution (NCHW, tensors that keep their memory across calls) that
    the dispatcher gives to the compiled loops, clamped to [lo, hi] inside the loop (an
    activation after it, at no pass of its own), as one step writing ``out``; None for
    another algorithm. ``out`` may share the input's bytes (a planner gives a dead input's
    bytes to the activation after it): the channels-last loop reads a copy of the input; the
    planes' loop, which would read what it wrote, writes ``spare`` (the convolution's own
    result, apart from both) and one copy moves it."""
    ops = (x, w, out) if bias is None else (x, w, out, bias)
    if not all(a.flags.c_contiguous and a.dtype == x.dtype for a in ops):
        return None
    dst, run = plan(x, w, stride, padding, dilation, x.shape[1], bias)
    if run.func is not _depthwise_accel or dst.shape != out.shape:
        return None
    args = run.args[:-1]  # (all but its output)
    if not np.may_share_memory(out, x) or \
            dispatch.compiled_depthwise_channels_last(x.shape[2] * x.shape[3], stride[1]):
        return partial(_depthwise_accel, *args, out, lo, hi)
    if spare is None or spare.shape != out.shape or spare.dtype != out.dtype or \
            not spare.flags.c_contiguous or np.may_share_memory(spare, x) or \
            np.may_share_memory(spare, out):
        return None
    return partial(_then_copy, partial(_depthwise_accel, *args, spare, lo, hi), spare, out)


def _then_copy(run, src, dst):
    run()
    np.copyto(dst, src)


def patches(x, K, stride, dilation, out_size, G):
    """im2col: the (G, N*P, Cg*KK) patches of ``x`` (N, C, *spatial, already padded)."""
    N, C = x.shape[:2]
    nsp = len(K)
    v = windows(x, K, stride, dilation, out_size)  # (N, C, *out, *K)
    v = v.reshape((N, G, C // G) + v.shape[2:])
    sp = tuple(range(3, 3 + nsp))
    ks = tuple(range(3 + nsp, 3 + 2 * nsp))
    return v.transpose((1, 0) + sp + (2,) + ks).reshape(
        G, N * math.prod(out_size), C // G * math.prod(K))


def by_group(t, G):
    """(N, C, *spatial) -> (G, N*P, C/G): the matmul layout of activations."""
    N, C = t.shape[:2]
    P = math.prod(t.shape[2:])
    return t.reshape(N, G, C // G, P).transpose(1, 0, 3, 2).reshape(G, N * P, C // G)


def conv_transpose(x, w, stride, padding, dilation, output_padding, groups):
    N, C = x.shape[:2]
    Cw, Og = w.shape[:2]
    K = w.shape[2:]
    nsp = len(K)
    G = groups
    if C != Cw or C % G:
        raise invalid(
            f"transposed convolution: input has {C} channels but weight {list(w.shape)} "
            f"with groups={G} expects {Cw}"
        )
    Cg = C // G
    in_size = x.shape[2:]
    full = [(n - 1) * s + d * (k - 1) + 1 for n, s, d, k in zip(in_size, stride, dilation, K)]
    out_size = [f - 2 * p + op for f, p, op in zip(full, padding, output_padding)]
    if any(o <= 0 for o in out_size):
        raise invalid(f"transposed convolution: output size {out_size} is too small")
    P, KK = math.prod(in_size), math.prod(K)
    xm = x.reshape(N, G, Cg, P).transpose(1, 0, 3, 2).reshape(G, N * P, Cg)
    wm = w.reshape(G, Cg, Og * KK)
    cols = np.matmul(xm, wm).reshape((G, N, *in_size, Og, *K))
    # -> (N, G, Og, *K, *in)
    order = (1, 0, 2 + nsp) + tuple(range(3 + nsp, 3 + 2 * nsp)) + tuple(range(2, 2 + nsp))
    cols = cols.transpose(order)
    buf_size = [max(f, p + o) for f, p, o in zip(full, padding, out_size)]
    buf = np.zeros((N, G, Og, *buf_size), dtype=cols.dtype)
    for taps in itertools.product(*(range(k) for k in K)):
        sl = (slice(None),) * 3
        sl += tuple(_tap(t, d, n, s) for t, d, n, s in zip(taps, dilation, in_size, stride))
        buf[sl] += cols[(slice(None),) * 3 + taps]
    crop = (slice(None),) * 3 + tuple(slice(p, p + o) for p, o in zip(padding, out_size))
    return buf[crop].reshape((N, G * Og, *out_size))


