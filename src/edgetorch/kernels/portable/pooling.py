"""Pooling: max (with indices, and its backward), average and adaptive average over 2-D windows.

Windows are strided views (``sliding_window_view``) of the padded input; reductions run over
the window axes, never over Python loops.
"""

from __future__ import annotations

import numpy as np

from ..conv.nchw import flat_crop, flat_result, flat_taps
from ..registry import kernel
from ._util import (
    INT64,
    expand_param,
    finish,
    float_compute,
    invalid,
    is_bool,
    is_float,
    opmath,
    windows,
)


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


def pool_pads(spatial, k, s, p, d, size) -> list[tuple[int, int]]:
    """(before, after) padding per spatial dim so that every window of ``size`` outputs lies
    inside the padded input (ceil_mode's last window may reach past the given padding)."""
    pads = []
    for n, kk, ss, pp, dd, o in zip(spatial, k, s, p, d, size):
        need = (o - 1) * ss + dd * (kk - 1) + 1
        pads.append((pp, max(pp, need - n - pp)))
    return pads


def _pool_pad(x4, k, s, p, d, size, fill):
    pads = pool_pads(x4.shape[2:], k, s, p, d, size)
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
    if s[0] == s[1] == 1 or d[0] == d[1] == 1:
        vals, arg = _max_taps_flat(xp, k, s, d, (oh, ow))
    else:
        vals, arg = _max_taps(xp, k, s, d, (oh, ow))
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


def _max_taps(xp, k, s, d, size):
    """Running max over the window taps and the tap index where it is, torch's way: a tap wins
    when it is greater, or NaN (torch keeps the *last* NaN of a window)."""
    oh, ow = size
    vals = arg = None
    for t in range(k[0] * k[1]):
        i, j = divmod(t, k[1])
        tap = xp[:, :, i * d[0] : i * d[0] + (oh - 1) * s[0] + 1 : s[0],
                 j * d[1] : j * d[1] + (ow - 1) * s[1] + 1 : s[1]]
        if vals is None:
            vals, arg = tap.copy(), np.zeros(tap.shape, INT64)
            continue
        wins = tap > vals
        if is_float(xp.dtype):
            wins |= np.isnan(tap)
        vals = np.where(wins, tap, vals)
        arg = np.where(wins, t, arg)
    return vals, arg


def _max_taps_flat(xp, k, s, d, size):
    """``_max_taps`` on contiguous flat runs (``flat_taps``), without masked copies (a
    random mask makes ``np.where``/``copyto(where=)`` ~100x slower than arithmetic): the
    max by ``np.maximum`` (NaN-propagating), then the first tap equal to it, counted as the
    number of leading taps that differ; a NaN window takes its last NaN tap."""
    Wq, L, taps = flat_taps(xp, k, s, d, size)
    N, C = xp.shape[:2]
    full, run = flat_result("pool_run", (N, C, size[0]), Wq, L, xp.dtype)
    np.copyto(run, taps[0])
    for tap in taps[1:]:
        np.maximum(run, tap, out=run)
    arg_full, arg = flat_result("pool_arg", (N, C, size[0]), Wq, L, INT64)
    arg[...] = 0
    before = np.ones(run.shape, bool)  # no tap so far equals the max
    for tap in taps[:-1]:
        before &= tap != run
        arg += before
    if is_float(xp.dtype):
        nan = np.isnan(run)
        if nan.any():
            last = np.zeros(run.shape, INT64)
            for t, tap in enumerate(taps):
                last = np.maximum(last, np.isnan(tap) * t)
            arg[...] = np.where(nan, last, arg)
    vals = np.empty((N, C) + tuple(size), xp.dtype)
    idx = np.empty((N, C) + tuple(size), INT64)
    flat_crop(full, Wq, size, vals)
    flat_crop(arg_full, Wq, size, idx)
    return vals, idx


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
    sums = windows(xp, k, s, d, (oh, ow)).sum(axis=(-2, -1), dtype=ct)
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


@kernel("aten::max_pool2d_with_indices_backward.grad_input")
def max_pool2d_with_indices_backward_grad_input(grad_output, self, kernel_size, stride, padding,
                                                dilation, ceil_mode, indices, grad_input):
    """Each output's gradient goes to the input position its index names (summed where
    windows overlap): one bincount over (plane, position)."""
    if grad_output.shape != indices.shape:
        raise invalid(f"max_pool2d backward: grad_output {list(grad_output.shape)} and indices "
                      f"{list(indices.shape)} differ")
    H, W = self.shape[-2:]
    planes = int(np.prod(self.shape[:-2], dtype=np.int64))
    ct = opmath(grad_output.dtype)
    per_plane = grad_output.size // planes if planes else 0
    g = grad_output.astype(ct, copy=False).reshape(planes, per_plane)
    idx = indices.astype(INT64, copy=False).reshape(planes, per_plane)
    if idx.size and (idx.min() < 0 or idx.max() >= H * W):
        raise invalid(f"max_pool2d backward: an index is outside the {H}x{W} input")
    flat = idx + (np.arange(planes, dtype=INT64) * (H * W))[:, None]
    r = np.bincount(flat.reshape(-1), weights=g.reshape(-1), minlength=planes * H * W)
    return finish(r.astype(ct).reshape(self.shape), grad_input)
