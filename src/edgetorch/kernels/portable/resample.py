"""Resampling: nearest and bilinear upsampling (plain and antialiased) and grid sampling.

Each output coordinate maps to source indices and weights computed once per axis, in torch's
order and precision (``area_pixel_compute_scale`` and friends in ``UpSample.h``); the gather
is one advanced-indexing step over the whole tensor.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._util import FLOAT32, check_result_fits, finish, float_compute, invalid, is_float


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
    check_result_fits((*input.shape[:2], oh, ow), out, "upsample_nearest2d")
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
    check_result_fits((*input.shape[:2], oh, ow), out, "upsample_bilinear2d")
    H, W = input.shape[2:]
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    h0, h1, lh0, lh1 = _linear_weights(H, oh, align_corners, scales[0], ct)
    w0, w1, lw0, lw1 = _linear_weights(W, ow, align_corners, scales[1], ct)
    rows = x[:, :, h0, :] * lh0[:, None] + x[:, :, h1, :] * lh1[:, None]
    r = rows[..., w0] * lw0 + rows[..., w1] * lw1
    return finish(_to_out_dtype(r, out), out, convert=True)


def _to_out_dtype(r: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Integer outputs round to nearest (torch's uint8 kernels round, in fixed point)."""
    if is_float(out.dtype):
        return r
    info = np.iinfo(out.dtype)
    return np.clip(np.rint(r), info.min, info.max)


# ---- antialiased bilinear --------------------------------------------------------------


def _aa_matrix(n, o, align_corners, scale, dt):
    """(o, n) weights of torch's antialiased linear filter (PIL's): a triangle stretched by
    the downscale factor, each row normalised to sum 1."""
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n / o
    support = s if s >= 1.0 else 1.0
    inv = 1.0 / s if s >= 1.0 else 1.0
    center = s * (np.arange(o) + 0.5)
    lo = np.maximum((center - support + 0.5).astype(np.int64), 0)
    hi = np.minimum((center + support + 0.5).astype(np.int64), n)
    j = np.arange(n)
    inside = (j[None, :] >= lo[:, None]) & (j[None, :] < hi[:, None])
    w = np.maximum(0.0, 1.0 - np.abs((j[None, :] - center[:, None] + 0.5) * inv)) * inside
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), 0)
    return w.astype(dt)


@kernel("aten::_upsample_bilinear2d_aa.out")
def upsample_bilinear2d_aa_out(self, output_size, align_corners, scales_h, scales_w, out):
    """Bilinear resize with antialiasing: two BLAS products with per-axis weight matrices."""
    if self.ndim != 4:
        raise invalid(f"_upsample_bilinear2d_aa: expected a 4-D input, got {list(self.shape)}")
    oh, ow = output_size
    check_result_fits((*self.shape[:2], oh, ow), out, "_upsample_bilinear2d_aa")
    H, W = self.shape[2:]
    ct = float_compute(self.dtype)
    x = self.astype(ct, copy=False)
    r = _aa_matrix(H, oh, align_corners, scales_h, ct) @ x @ \
        _aa_matrix(W, ow, align_corners, scales_w, ct).T
    return finish(_to_out_dtype(r, out), out, convert=True)


# ---- grid sampling ---------------------------------------------------------------------

_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _unnormalize(c, size, align_corners):
    return (c + 1) / 2 * (size - 1) if align_corners else ((c + 1) * size - 1) / 2


def _reflect(c, twice_low, twice_high):
    if twice_low == twice_high:
        return np.zeros_like(c)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c = np.abs(c - low)
    extra = np.fmod(c, span)
    flips = np.floor(c / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low).astype(c.dtype)


def _source(c, size, padding_mode, align_corners):
    """torch's compute_coordinates: where a (continuous) source coordinate reads from."""
    if padding_mode == _BORDER:
        return np.clip(c, 0, size - 1)
    if padding_mode == _REFLECTION:
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return np.clip(c, 0, size - 1)
    return c


def _as_index(c, size):
    return np.clip(np.nan_to_num(c, nan=-1.0), -2, size + 1).astype(np.int64)


def _read(x, iy, ix):
    """x[n, :, iy, ix] as (N, Ho, Wo, C), zero where (iy, ix) is outside the image."""
    N, _, H, W = x.shape
    ok = (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W)
    n = np.arange(N)[:, None, None]
    v = x[n, :, np.clip(iy, 0, H - 1), np.clip(ix, 0, W - 1)]
    return np.where(ok[..., None], v, 0)


def _cubic_weights(t, a=-0.75):
    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@kernel("aten::grid_sampler_2d.out")
def grid_sampler_2d_out(input, grid, interpolation_mode, padding_mode,  # noqa: A002
                        align_corners, out):
    """Sample ``input`` (N, C, H, W) at ``grid`` (N, Ho, Wo, 2) normalised (x, y) positions:
    bilinear, nearest (ties to even) or bicubic (A = -0.75); zeros, border or reflection
    padding. Half and bfloat16 compute in float32 and round once, where torch's CPU kernel
    computes step by step in that precision (coordinates included: its nearest may pick a
    neighbouring pixel near a tie)."""
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise invalid(f"grid_sampler_2d: input {list(input.shape)} must be (N, C, H, W) and "
                      f"grid {list(grid.shape)} (N, H_out, W_out, 2)")
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    H, W = x.shape[2:]
    gx = _unnormalize(grid[..., 0].astype(ct), W, align_corners)
    gy = _unnormalize(grid[..., 1].astype(ct), H, align_corners)
    with np.errstate(invalid="ignore"):
        if interpolation_mode == _BICUBIC:
            x0, y0 = np.floor(gx), np.floor(gy)
            wx, wy = _cubic_weights(gx - x0), _cubic_weights(gy - y0)
            r = 0
            for i in range(4):
                yi = _as_index(_source(y0 - 1 + i, H, padding_mode, align_corners), H)
                row = 0
                for j in range(4):
                    xj = _as_index(_source(x0 - 1 + j, W, padding_mode, align_corners), W)
                    row = row + _read(x, yi, xj) * wx[j][..., None]
                r = r + row * wy[i][..., None]
        else:
            sx = _source(gx, W, padding_mode, align_corners)
            sy = _source(gy, H, padding_mode, align_corners)
            if interpolation_mode == _NEAREST:
                r = _read(x, _as_index(np.rint(sy), H), _as_index(np.rint(sx), W))
            elif interpolation_mode == _BILINEAR:
                x0, y0 = np.floor(sx), np.floor(sy)
                tx, ty = (sx - x0)[..., None], (sy - y0)[..., None]
                ix, iy = _as_index(x0, W), _as_index(y0, H)
                r = (_read(x, iy, ix) * (1 - tx) * (1 - ty) + _read(x, iy, ix + 1) * tx * (1 - ty)
                     + _read(x, iy + 1, ix) * (1 - tx) * ty + _read(x, iy + 1, ix + 1) * tx * ty)
            else:
                raise invalid(f"grid_sampler_2d: unknown interpolation mode {interpolation_mode}")
    return finish(np.moveaxis(np.asarray(r, dtype=ct), -1, 1), out)
