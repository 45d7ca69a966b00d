"""Neural-network kernels: convolution, normalisation, pooling, upsampling, padding.

Convolution is im2col over ``sliding_window_view`` followed by one batched BLAS matmul per
call (groups are the batch); depthwise convolution accumulates kernel taps over the whole
tensor. Transposed convolution multiplies first and scatters the taps back (col2im).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..registry import kernel
from ._util import (
    FLOAT32,
    INT64,
    expand_param,
    finish,
    float_compute,
    invalid,
    is_bool,
    is_float,
    opmath,
    result_type,
    scalar,
)

# ---- convolution -----------------------------------------------------------------------


def _windows(x, kernel_size, stride, dilation, out_size):
    """View (N, C, *out_size, *kernel_size) of ``x`` (N, C, *spatial), no copy."""
    nsp = len(kernel_size)
    extent = [d * (k - 1) + 1 for k, d in zip(kernel_size, dilation)]
    v = sliding_window_view(x, extent, axis=tuple(range(2, 2 + nsp)))
    sl = (slice(None), slice(None))
    sl += tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_size, stride))
    sl += tuple(slice(None, None, d) for d in dilation)
    return v[sl]


def _tap(t, d, o, s):
    return slice(t * d, t * d + (o - 1) * s + 1, s)


def _conv(x, w, stride, padding, dilation, groups):
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
    if any(padding):
        x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out_size = [
        (n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(x.shape[2:], K, stride, dilation)
    ]
    if any(o <= 0 for o in out_size):
        raise invalid(f"convolution: output size {out_size} is too small (input {list(x.shape)})")
    Og = Cout // G
    if Cg == 1 and G > 1:
        # Depthwise (optionally with a channel multiplier): accumulate one tap at a time.
        wr = w.reshape((G, Og) + K)
        acc = np.zeros((N, G, Og, *out_size), dtype=x.dtype)
        bshape = (1, G, Og) + (1,) * nsp
        for taps in itertools.product(*(range(k) for k in K)):
            sl = (slice(None), slice(None))
            sl += tuple(_tap(t, d, o, s) for t, d, o, s in zip(taps, dilation, out_size, stride))
            acc += x[sl][:, :, None] * wr[(slice(None), slice(None)) + taps].reshape(bshape)
        return acc.reshape((N, Cout, *out_size))
    v = _windows(x, K, stride, dilation, out_size)  # (N, C, *out, *K)
    v = v.reshape((N, G, Cg) + v.shape[2:])
    sp = tuple(range(3, 3 + nsp))
    ks = tuple(range(3 + nsp, 3 + 2 * nsp))
    P, KK = math.prod(out_size), math.prod(K)
    cols = v.transpose((1, 0) + sp + (2,) + ks).reshape(G, N * P, Cg * KK)
    wm = w.reshape(G, Og, Cg * KK).transpose(0, 2, 1)
    r = np.matmul(cols, wm)  # (G, N*P, Og)
    r = r.reshape((G, N, *out_size, Og))
    r = r.transpose((1, 0, 2 + nsp) + tuple(range(2, 2 + nsp)))
    return r.reshape((N, Cout, *out_size))


def _conv_transpose(x, w, stride, padding, dilation, output_padding, groups):
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


@kernel("aten::convolution.out")
def convolution_out(input, weight, bias, stride, padding, dilation, transposed,  # noqa: A002
                    output_padding, groups, out):
    nsp = weight.ndim - 2
    if nsp < 1:
        raise invalid(f"convolution: weight must have at least 3 dims, got {list(weight.shape)}")
    x = input
    if x.ndim != nsp + 2:
        raise invalid(f"convolution: input {list(input.shape)} does not match weight "
                      f"{list(weight.shape)}")
    stride = expand_param(stride, nsp, "stride")
    padding = expand_param(padding, nsp, "padding")
    dilation = expand_param(dilation, nsp, "dilation")
    ct = opmath(result_type(x, weight))
    if not is_float(ct):
        ct = FLOAT32
    x = x.astype(ct, copy=False)
    w = weight.astype(ct, copy=False)
    if transposed:
        output_padding = expand_param(output_padding, nsp, "output_padding")
        r = _conv_transpose(x, w, stride, padding, dilation, output_padding, groups)
    else:
        r = _conv(x, w, stride, padding, dilation, groups)
    if bias is not None:
        r = r + bias.astype(ct, copy=False).reshape((1, -1) + (1,) * nsp)
    return finish(r, out)


# ---- normalisation ---------------------------------------------------------------------


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2) if x.ndim > 1 else (-1,)


def _affine(y, weight, bias, shape, ct):
    if weight is not None:
        y = y * weight.astype(ct, copy=False).reshape(shape)
    if bias is not None:
        y = y + bias.astype(ct, copy=False).reshape(shape)
    return y


def _stat_out(values, out):
    """mean/invstd outputs: kept empty when the program planned them empty (as ExecuTorch)."""
    if out.size == 0 and values.size != 0:
        return out
    return finish(values.reshape(out.shape) if values.size == out.size else values, out)


def _bn_inference(input, weight, bias, running_mean, running_var, eps, out, mean_out, invstd_out):
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    shape = _channel_shape(x)
    mean = running_mean.astype(ct, copy=False)
    with np.errstate(all="ignore"):
        invstd = 1 / np.sqrt(running_var.astype(ct, copy=False) + ct.type(eps))
    alpha = invstd if weight is None else invstd * weight.astype(ct, copy=False)
    beta = -mean * alpha if bias is None else bias.astype(ct, copy=False) - mean * alpha
    y = x * alpha.reshape(shape) + beta.reshape(shape)
    return finish(y, out), _stat_out(mean, mean_out), _stat_out(invstd, invstd_out)


@kernel("aten::_native_batch_norm_legit_no_training.out")
def native_batch_norm_legit_no_training_out(input, weight, bias, running_mean,  # noqa: A002
                                            running_var, momentum, eps, out0, out1, out2):
    return _bn_inference(input, weight, bias, running_mean, running_var, eps, out0, out1, out2)


@kernel("aten::_native_batch_norm_legit.out")
def native_batch_norm_legit_out(input, weight, bias, running_mean, running_var,  # noqa: A002
                                training, momentum, eps, out, save_mean, save_invstd):
    if training:
        raise invalid(
            "_native_batch_norm_legit with training=True updates running statistics in place, "
            "which the portable kernels do not do (as in ExecuTorch); export the model in eval() "
            "mode"
        )
    return _bn_inference(input, weight, bias, running_mean, running_var, eps, out, save_mean,
                         save_invstd)


@kernel("aten::_native_batch_norm_legit.no_stats_out")
def native_batch_norm_legit_no_stats_out(input, weight, bias, training, momentum,  # noqa: A002
                                         eps, out, save_mean, save_invstd):
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    axes = (0,) + tuple(range(2, x.ndim))
    n = max(1, math.prod(x.shape[a] for a in axes))
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=axes, keepdims=True) / ct.type(n)
        d = x - mean
        var = np.sum(d * d, axis=axes, keepdims=True) / ct.type(n)
        invstd = 1 / np.sqrt(var + ct.type(eps))
    y = _affine(d * invstd, weight, bias, _channel_shape(x), ct)
    return finish(y, out), _stat_out(mean.reshape(-1), save_mean), \
        _stat_out(invstd.reshape(-1), save_invstd)


@kernel("aten::native_layer_norm.out")
def native_layer_norm_out(input, normalized_shape, weight, bias, eps,  # noqa: A002
                          out0, out1, out2):
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != tuple(normalized_shape) or k > input.ndim:
        raise invalid(f"layer_norm: normalized_shape {list(normalized_shape)} does not match "
                      f"input shape {list(input.shape)}")
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    axes = tuple(range(x.ndim - k, x.ndim))
    n = math.prod(normalized_shape)
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=axes, keepdims=True) / ct.type(n)
        d = x - mean
        var = np.sum(d * d, axis=axes, keepdims=True) / ct.type(n)
        rstd = 1 / np.sqrt(var + ct.type(eps))
        y = d * rstd
    if weight is not None:
        y = y * weight.astype(ct, copy=False)
    if bias is not None:
        y = y + bias.astype(ct, copy=False)
    return finish(y, out0), finish(mean, out1), finish(rstd, out2)


@kernel("aten::native_group_norm.out")
def native_group_norm_out(input, weight, bias, N, C, HxW, group, eps,  # noqa: A002
                          out0, out1, out2):
    if C % group:
        raise invalid(f"group_norm: {C} channels are not divisible into {group} groups")
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False).reshape(N, group, -1)
    n = x.shape[2]
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=2, keepdims=True) / ct.type(max(n, 1))
        d = x - mean
        var = np.sum(d * d, axis=2, keepdims=True) / ct.type(max(n, 1))
        rstd = 1 / np.sqrt(var + ct.type(eps))
    y = (d * rstd).reshape(input.shape)
    y = _affine(y, weight, bias, _channel_shape(input), ct)
    return finish(y, out0), finish(mean.reshape(N, group), out1), \
        finish(rstd.reshape(N, group), out2)


# ---- pooling ---------------------------------------------------------------------------


def _pool_params(x, kernel_size, stride, padding, dilation, ceil_mode, op):
    if x.ndim not in (3, 4):
        raise invalid(f"{op}: expected a 3-D or 4-D input, got shape {list(x.shape)}")
    k = expand_param(kernel_size, 2, "kernel_size")
    s = expand_param(stride, 2, "stride") if len(stride) else list(k)
    p = expand_param(padding, 2, "padding")
    d = expand_param(dilation, 2, "dilation")
    size = []
    for n, kk, ss, pp, dd in zip(x.shape[-2:], k, s, p, d):
        if pp > kk // 2:
            raise invalid(f"{op}: padding {pp} should be at most half of kernel size {kk}")
        num = n + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil_mode else 0)
        o = num // ss + 1
        if ceil_mode and (o - 1) * ss >= n + pp:
            o -= 1
        if o <= 0:
            raise invalid(f"{op}: output size {o} is too small for input {list(x.shape)}")
        size.append(o)
    return k, s, p, d, size


def _pool_pad(x4, k, s, p, d, size, fill):
    pads = []
    for n, kk, ss, pp, dd, o in zip(x4.shape[2:], k, s, p, d, size):
        need = (o - 1) * ss + dd * (kk - 1) + 1
        pads.append((pp, max(pp, need - n - pp)))
    return np.pad(x4, [(0, 0), (0, 0)] + pads, constant_values=fill)


@kernel("aten::max_pool2d_with_indices.out")
def max_pool2d_with_indices_out(self, kernel_size, stride, padding, dilation, ceil_mode,
                                out, indices):
    k, s, p, d, (oh, ow) = _pool_params(self, kernel_size, stride, padding, dilation, ceil_mode,
                                        "max_pool2d")
    x4 = self if self.ndim == 4 else self[None]
    H, W = x4.shape[2:]
    if is_float(x4.dtype):
        x4 = x4.astype(opmath(x4.dtype), copy=False)
        fill = -np.inf
    elif is_bool(x4.dtype):
        fill = False
    else:
        fill = np.iinfo(x4.dtype).min
    xp = _pool_pad(x4, k, s, p, d, (oh, ow), fill)
    win = _windows(xp, k, s, d, (oh, ow))
    flat = win.reshape(win.shape[:4] + (k[0] * k[1],))
    arg = np.argmax(flat, axis=-1)
    if is_float(flat.dtype):
        # torch keeps the *last* NaN of a window (it updates on every NaN it meets)
        isnan = np.isnan(flat)
        has_nan = isnan.any(axis=-1)
        if has_nan.any():
            last = flat.shape[-1] - 1 - np.argmax(isnan[..., ::-1], axis=-1)
            arg = np.where(has_nan, last, arg)
    vals = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    ki, kj = np.divmod(arg, k[1])
    ih = (np.arange(oh) * s[0] - p[0])[:, None] + ki * d[0]
    iw = (np.arange(ow) * s[1] - p[1])[None, :] + kj * d[1]
    # A window whose valid values are all -inf: torch reports its first valid position.
    bad = (ih < 0) | (iw < 0) | (ih >= H) | (iw >= W)
    if bad.any():
        h0 = np.arange(oh) * s[0] - p[0]
        h0 = np.where(h0 < 0, h0 + (-h0 + d[0] - 1) // d[0] * d[0], h0)[:, None]
        w0 = np.arange(ow) * s[1] - p[1]
        w0 = np.where(w0 < 0, w0 + (-w0 + d[1] - 1) // d[1] * d[1], w0)[None, :]
        ih, iw = np.where(bad, h0, ih), np.where(bad, w0, iw)
    idx = (ih * W + iw).astype(INT64)
    if self.ndim == 3:
        vals, idx = vals[0], idx[0]
    return finish(vals, out), finish(idx, indices)


def _axis_sizes(n, k, s, p, o):
    start = np.arange(o) * s - p
    end = np.minimum(start + k, n + p)
    size_pad = end - start
    size = np.minimum(end, n) - np.maximum(start, 0)
    return size_pad, size


@kernel("aten::avg_pool2d.out")
def avg_pool2d_out(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override, out):
    k, s, p, d, (oh, ow) = _pool_params(self, kernel_size, stride, padding, [1], ceil_mode,
                                        "avg_pool2d")
    x4 = self if self.ndim == 4 else self[None]
    H, W = x4.shape[2:]
    ct = opmath(x4.dtype) if is_float(x4.dtype) else x4.dtype
    xp = _pool_pad(x4.astype(ct, copy=False), k, s, p, d, (oh, ow), 0)
    sums = _windows(xp, k, s, d, (oh, ow)).sum(axis=(-2, -1), dtype=ct)
    hp, hs = _axis_sizes(H, k[0], s[0], p[0], oh)
    wp, ws = _axis_sizes(W, k[1], s[1], p[1], ow)
    valid = (hs[:, None] > 0) & (ws[None, :] > 0)
    if divisor_override:
        div = np.full((oh, ow), divisor_override)
    elif count_include_pad:
        div = hp[:, None] * wp[None, :]
    else:
        div = hs[:, None] * ws[None, :]
    div = np.where(valid, div, 1)
    if is_float(ct):
        r = sums / div.astype(ct)
    else:  # integer inputs: C integer division, truncating toward zero
        r = np.sign(sums) * (np.abs(sums) // div)
    r = np.where(valid, r, 0)
    return finish(r[0] if self.ndim == 3 else r, out)


def _adaptive_matrix(n, o, dt):
    i = np.arange(o)
    start = (i * n) // o
    end = -((-(i + 1) * n) // o)
    cols = np.arange(n)
    m = (cols[None, :] >= start[:, None]) & (cols[None, :] < end[:, None])
    return m.astype(dt) / (end - start)[:, None].astype(dt)


@kernel("aten::_adaptive_avg_pool2d.out")
def adaptive_avg_pool2d_out(self, output_size, out):
    if self.ndim not in (3, 4):
        raise invalid(f"adaptive_avg_pool2d: expected 3-D or 4-D input, got {list(self.shape)}")
    oh, ow = expand_param(output_size, 2, "output_size")
    H, W = self.shape[-2:]
    ct = float_compute(self.dtype)
    x = self.astype(ct, copy=False)
    if H % oh == 0 and W % ow == 0:
        r = x.reshape(x.shape[:-2] + (oh, H // oh, ow, W // ow)).mean(axis=(-3, -1), dtype=ct)
    else:
        r = _adaptive_matrix(H, oh, ct) @ x @ _adaptive_matrix(W, ow, ct).T
    return finish(r, out)


# ---- upsampling ------------------------------------------------------------------------


def _upsample_sizes(x, output_size, scale_factors, op):
    if x.ndim != 4:
        raise invalid(f"{op}: expected a 4-D input, got shape {list(x.shape)}")
    H, W = x.shape[2:]
    if output_size is not None:
        if scale_factors is not None:
            raise invalid(f"{op}: give either output_size or scale_factors, not both")
        oh, ow = output_size
        return oh, ow, [None, None]
    if scale_factors is None:
        raise invalid(f"{op}: one of output_size or scale_factors is required")
    sh, sw = scale_factors
    return int(H * sh), int(W * sw), [sh, sw]


def _scale(n, o, scale, dt=FLOAT32):
    """torch's compute_scales_value, in ``dt`` (float for nearest, opmath for linear)."""
    t = np.dtype(dt).type
    if scale is not None and scale > 0:
        return t(1.0 / scale)
    return t(n) / t(o)


def _nearest_index(n, o, scale):
    if o == n:
        return np.arange(o)
    if o == 2 * n:
        return np.arange(o) >> 1
    src = np.floor(np.arange(o, dtype=np.float32) * _scale(n, o, scale)).astype(np.int64)
    return np.minimum(src, n - 1)


@kernel("aten::upsample_nearest2d.vec_out")
def upsample_nearest2d_vec_out(input, output_size, scale_factors, out):  # noqa: A002
    oh, ow, scales = _upsample_sizes(input, output_size, scale_factors, "upsample_nearest2d")
    H, W = input.shape[2:]
    hi = _nearest_index(H, oh, scales[0])
    wi = _nearest_index(W, ow, scales[1])
    return finish(input[:, :, hi[:, None], wi[None, :]], out)


def _linear_weights(n, o, align_corners, scale, dt):
    """Source indices and lambdas of linear interpolation, computed in ``dt`` as torch does."""
    t = np.dtype(dt).type
    if o == n:
        i = np.arange(o)
        return i, i, np.ones(o, dt), np.zeros(o, dt)
    if align_corners:
        ratio = t((n - 1) / (o - 1)) if o > 1 else t(0)
        src = ratio * np.arange(o, dtype=dt)
    else:
        ratio = _scale(n, o, scale, dt)
        src = ratio * (np.arange(o, dtype=dt) + t(0.5)) - t(0.5)
        src = np.maximum(src, t(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    l1 = np.clip(src - i0.astype(dt), 0, 1).astype(dt)
    i1 = i0 + (i0 < n - 1)
    return i0, i1, t(1) - l1, l1


@kernel("aten::upsample_bilinear2d.vec_out")
def upsample_bilinear2d_vec_out(input, output_size, align_corners, scale_factors,  # noqa: A002
                                out):
    oh, ow, scales = _upsample_sizes(input, output_size, scale_factors, "upsample_bilinear2d")
    H, W = input.shape[2:]
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    h0, h1, lh0, lh1 = _linear_weights(H, oh, align_corners, scales[0], ct)
    w0, w1, lw0, lw1 = _linear_weights(W, ow, align_corners, scales[1], ct)
    rows = x[:, :, h0, :] * lh0[:, None] + x[:, :, h1, :] * lh1[:, None]
    r = rows[..., w0] * lw0 + rows[..., w1] * lw1
    return finish(r, out)


# ---- padding ---------------------------------------------------------------------------


@kernel("aten::constant_pad_nd.out")
def constant_pad_nd_out(self, pad, value, out):
    if len(pad) % 2 or len(pad) // 2 > self.ndim:
        raise invalid(f"constant_pad_nd: padding {list(pad)} does not fit a tensor of rank "
                      f"{self.ndim}")
    shape = list(self.shape)
    src = [slice(None)] * self.ndim
    dst = [slice(None)] * self.ndim
    for j in range(len(pad) // 2):
        ax = self.ndim - 1 - j
        lo, hi = pad[2 * j], pad[2 * j + 1]
        n = shape[ax]
        new = n + lo + hi
        if new < 0:
            raise invalid(f"constant_pad_nd: padding {list(pad)} makes dim {ax} negative")
        shape[ax] = new
        # the part of the input that survives negative padding, and where it lands
        s0, s1 = max(-lo, 0), n - max(-hi, 0)
        d0 = max(lo, 0)
        src[ax] = slice(s0, max(s0, s1))
        dst[ax] = slice(d0, d0 + max(0, s1 - s0))
    r = np.full(shape, scalar(value, self.dtype))
    r[tuple(dst)] = self[tuple(src)]
    return finish(r, out)


def _np_pad(x, pad, nd, mode, op):
    if len(pad) != 2 * nd or x.ndim not in (nd + 1, nd + 2):
        raise invalid(f"{op}: padding {list(pad)} does not fit input shape {list(x.shape)}")
    widths = [(0, 0)] * (x.ndim - nd) + [(pad[2 * j], pad[2 * j + 1]) for j in
                                         reversed(range(nd))]
    if mode == "reflect":
        for (lo, hi), n in zip(widths, x.shape):
            if lo >= n or hi >= n:
                if lo or hi:
                    raise invalid(f"{op}: padding {list(pad)} must be smaller than the input "
                                  f"dims {list(x.shape)}")
    return np.pad(x, widths, mode=mode)


def _pad_kernel(name, nd, mode):
    def k(self, padding, out):
        return finish(_np_pad(self, padding, nd, mode, name), out)

    k.__name__ = k.__qualname__ = name.split("::")[1].split(".")[0]
    kernel(name)(k)


_pad_kernel("aten::reflection_pad1d.out", 1, "reflect")
_pad_kernel("aten::reflection_pad2d.out", 2, "reflect")
_pad_kernel("aten::replication_pad1d.out", 1, "edge")
_pad_kernel("aten::replication_pad2d.out", 2, "edge")
