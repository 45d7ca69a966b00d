"""Linear algebra and neural-network records: matmuls, convolution, norms, pooling, upsampling, padding."""

from __future__ import annotations

import numpy as np
from kernel_harness import (
    BF16,
    C64,
    C128,
    F16,
    I8,
    I16,
    I32,
    U8,
    A,
    F,
    T,
    arr,
    cases_of,
    isfloat,
    isint,
    op,
    to_numpy,
    to_torch,
)

# linear algebra (BLAS sums in a different order than torch's: 1e-5 still holds at these sizes)
op("aten::mm.out", F("mm.default"),
   cases_of([T((3, 4)), T((4, 5))], [T((0, 4)), T((4, 5))], [T((3, 0)), T((0, 5))],
            [T((1, 7)), T((7, 1))]))
op("aten::bmm.out", F("bmm.default"),
   cases_of([T((2, 3, 4)), T((2, 4, 5))], [T((0, 3, 4)), T((0, 4, 2))]))
op("aten::addmm.out", F("addmm.default"),
   lambda rng, dt: [[arr(rng, (5,), dt), arr(rng, (3, 4), dt), arr(rng, (4, 5), dt), 1, 1],
                    [arr(rng, (3, 5), dt), arr(rng, (3, 4), dt), arr(rng, (4, 5), dt), 2, 3],
                    [arr(rng, (1, 5), dt), arr(rng, (3, 0), dt), arr(rng, (0, 5), dt), 1, 1]]
   + ([[np.full((3, 5), np.nan, dt), arr(rng, (3, 4), dt), arr(rng, (4, 5), dt), 0, 0.5]]
      if isfloat(dt) else []))
op("aten::linear.out", F("linear.default"),
   cases_of([T((2, 3, 4)), T((5, 4)), T((5,))], [T((3, 4)), T((5, 4)), None],
            [T((4,)), T((5, 4)), T((5,))], [T((0, 4)), T((2, 4)), T((2,))]))


# convolution: (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
def _conv(x, w, b, s, p, d, tr, op_, g):
    return [T(x), T(w), T(b) if b else None, s, p, d, tr, op_, g]


_CONVS = [
    _conv((2, 3, 8, 8), (4, 3, 3, 3), (4,), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    _conv((1, 4, 9, 9), (6, 4, 3, 3), None, [2, 2], [0, 0], [2, 2], False, [0, 0], 1),
    _conv((2, 4, 7, 7), (6, 2, 3, 3), (6,), [2, 1], [1, 2], [1, 1], False, [0, 0], 2),
    _conv((2, 6, 8, 8), (6, 1, 3, 3), (6,), [1, 1], [1, 1], [1, 1], False, [0, 0], 6),
    _conv((1, 3, 7, 6), (6, 1, 3, 3), None, [2, 2], [1, 0], [1, 2], False, [0, 0], 3),
    _conv((2, 3, 10), (5, 3, 3), (5,), [2], [1], [1], False, [0], 1),
    _conv((2, 3, 5, 5), (8, 3, 1, 1), (8,), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    _conv((1, 2, 4, 5, 5), (3, 2, 2, 3, 3), (3,), [1, 2, 1], [0, 1, 1], [1, 1, 1], False,
          [0, 0, 0], 1),
    _conv((0, 3, 5, 5), (4, 3, 3, 3), (4,), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    _conv((2, 4, 5, 5), (4, 3, 3, 3), (3,), [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
    _conv((1, 4, 4, 4), (4, 2, 3, 3), (4,), [2, 2], [0, 1], [2, 1], True, [1, 0], 2),
    _conv((2, 3, 6), (3, 2, 4), None, [3], [1], [1], True, [2], 1),
    _conv((1, 4, 5, 5), (4, 1, 3, 3), (4,), [2, 2], [1, 1], [1, 1], True, [0, 0], 4),
    _conv((1, 2, 3, 3), (2, 3, 2, 2), None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1),
]
_SMALL_INTS = (I8, I16, I32, U8)  # torch has no dilated or transposed conv for these


def _conv_cases(rng, dt):
    convs = _CONVS
    if dt in _SMALL_INTS:
        convs = [c for c in convs if c[5] == [1] * len(c[5]) and not c[6]]
    return cases_of(*convs)(rng, dt)


op("aten::convolution.out", F("convolution.default"), _conv_cases)


def _bn_cases(rng, dt):
    out = []
    for shape in ((2, 3, 4, 4), (4, 3), (2, 3, 5), (0, 3, 2, 2)):
        c = shape[1]
        w, b = arr(rng, (c,), dt), arr(rng, (c,), dt)
        rm, rv = arr(rng, (c,), dt), arr(rng, (c,), dt, 0.5, 2)
        out += [[arr(rng, shape, dt), w, b, rm, rv, 0.1, 1e-5],
                [arr(rng, shape, dt), None, None, rm, rv, 0.1, 1e-3]]
    return out


op("aten::_native_batch_norm_legit_no_training.out",
   F("_native_batch_norm_legit_no_training.default"), _bn_cases)
op("aten::_native_batch_norm_legit.out", F("_native_batch_norm_legit.default"),
   lambda rng, dt: [a[:5] + [False] + a[5:] for a in _bn_cases(rng, dt)])
op("aten::_native_batch_norm_legit.no_stats_out", F("_native_batch_norm_legit.no_stats"),
   cases_of([T((2, 3, 4, 4)), T((3,)), T((3,)), True, 0.1, 1e-5],
            [T((4, 3)), None, None, True, 0.1, 1e-5], [T((2, 3, 5)), T((3,)), None, True, 0.1, 1e-3]))
op("aten::native_layer_norm.out", F("native_layer_norm.default"),
   cases_of([T((2, 3, 8)), [8], T((8,)), T((8,)), 1e-5],
            [T((2, 3, 8)), [3, 8], T((3, 8)), None, 1e-5], [T((4, 6)), [6], None, None, 1e-3],
            [T((0, 5)), [5], T((5,)), T((5,)), 1e-5], [T((7,)), [7], T((7,)), T((7,)), 1e-5]))
op("aten::native_group_norm.out", F("native_group_norm.default"),
   cases_of([T((2, 6, 4, 4)), T((6,)), T((6,)), 2, 6, 16, 3, 1e-5],
            [T((3, 4, 5)), None, None, 3, 4, 5, 2, 1e-5], [T((2, 4)), T((4,)), T((4,)), 2, 4, 1, 4, 1e-5]))

_POOL = [((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
         ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], True),
         ((1, 2, 10, 10), [3, 2], [], [1, 0], [1, 1], False),
         ((2, 7, 7), [3, 3], [2, 3], [1, 1], [2, 2], True),
         ((1, 1, 6, 6), [2, 2], [2, 2], [1, 1], [1, 1], True),
         ((0, 2, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False),
         ((1, 3, 5, 5), [5, 5], [1, 1], [2, 2], [1, 1], False)]


def _maxpool_cases(rng, dt):
    cs = [[arr(rng, s, dt, -50, 50), k, st, p, d, c] for s, k, st, p, d, c in _POOL]
    if isfloat(dt):
        x = arr(rng, (1, 1, 4, 4), dt)
        x[0, 0, 0, 1] = x[0, 0, 0, 0] = np.nan
        x[0, 0, 3, :] = -np.inf
        cs += [[x, [2, 2], [2, 2], [0, 0], [1, 1], False], [x, [2, 2], [1, 1], [1, 1], [1, 1], True]]
    return cs


op("aten::max_pool2d_with_indices.out", F("max_pool2d_with_indices.default"), _maxpool_cases)
op("aten::avg_pool2d.out", F("avg_pool2d.default"),
   lambda rng, dt: [[arr(rng, s, dt), k, st, p, c, cip, dv]
                    for s, k, st, p, _, c in _POOL
                    for cip, dv in ((True, None), (False, None), (True, 5))])
op("aten::_adaptive_avg_pool2d.out", F("_adaptive_avg_pool2d.default"),
   cases_of([T((2, 3, 8, 8)), [4, 4]], [T((1, 2, 7, 9)), [3, 4]], [T((2, 3, 5, 5)), [1, 1]],
            [T((3, 6, 5)), [4, 2]], [T((1, 2, 3, 3)), [5, 4]], [T((0, 2, 4, 4)), [2, 2]]))
op("aten::upsample_nearest2d.vec_out", F("upsample_nearest2d.vec"),
   cases_of([T((2, 3, 8, 8)), [16, 16], None], [T((1, 2, 4, 6)), [5, 7], None],
            [T((1, 2, 4, 6)), None, [2.0, 3.0]], [T((1, 2, 8, 6)), None, [0.5, 0.5]],
            [T((1, 1, 5, 3)), None, [1.7, 1.3]], [T((1, 2, 6, 6)), [4, 9], None]))
op("aten::upsample_bilinear2d.vec_out", F("upsample_bilinear2d.vec"),
   lambda rng, dt: [[arr(rng, s, dt), o, ac, sc]
                    for s, o, sc in (((1, 2, 4, 5), [7, 9], None), ((2, 3, 8, 8), None, [2.0, 2.0]),
                                     ((1, 2, 9, 9), [3, 3], None), ((1, 1, 5, 4), None, [1.5, 0.75]),
                                     ((1, 2, 4, 4), [4, 6], None), ((1, 1, 3, 3), [1, 1], None))
                    for ac in (False, True)], tols={U8: 1})
op("aten::constant_pad_nd.out", F("constant_pad_nd.default"),
   cases_of([T((2, 3)), [1, 2], 0], [T((2, 3, 4)), [1, 1, 2, 0], 1.5], [T((3, 5)), [-1, 2], 0],
            [T((3, 5)), [1, -2, -1, 1], 2], [T((0, 2)), [1, 1], 0], [T((4,)), [0, 0], 0]))
for _n, _nd in (("reflection_pad1d", 1), ("reflection_pad2d", 2), ("replication_pad1d", 1),
                ("replication_pad2d", 2)):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       cases_of([T((2, 3, 6)), [2, 1]], [T((3, 5)), [0, 3]]) if _nd == 1 else
       cases_of([T((1, 2, 5, 5)), [1, 2, 2, 0]], [T((2, 4, 3)), [2, 2, 1, 1]]))



def _conv_backward_cases(rng, dt):
    cases = []
    for c in _CONVS:
        x, w = c[0](rng, dt), c[1](rng, dt)
        stride, padding, dilation, transposed, output_padding, groups = c[3:]
        try:
            y = A.convolution.default(to_torch(x), to_torch(w), None, stride, padding, dilation,
                                      transposed, output_padding, groups)
            gy = arr(rng, tuple(y.shape), dt)
            args = [gy, x, w, [y.shape[1]], stride, padding, dilation, transposed,
                    output_padding, groups, [True, True, True]]
            if isint(dt):  # torch has integer backward only for some configurations
                F("convolution_backward.default")(*to_torch(args))
        except (RuntimeError, NotImplementedError):
            continue  # (the undeclared-dtype test probes what torch supports)
        cases.append(args)
    return cases


# torch's half backward rounds its partial products to half, and so does its bfloat16
# backward where oneDNN has no bfloat16 kernels (seen on an AVX2 Zen 3, not on AVX-512);
# ours accumulates in float32: compared with torch's float32 result, rounded
op("aten::convolution_backward.out", F("convolution_backward.default"), _conv_backward_cases,
   tol=1e-4, upcast=(F16, BF16))


def _maxpool_backward_cases(rng, dt):
    cases = []
    for s, k, st, p, d, c in _POOL:
        x = arr(rng, s, dt, -50, 50)
        try:
            y, ind = A.max_pool2d_with_indices.default(to_torch(x), k, st, p, d, c)
        except (RuntimeError, NotImplementedError):
            continue
        gy = arr(rng, tuple(y.shape), dt)
        cases.append([gy, x, k, st, p, d, c, to_numpy(ind)])
    return cases


op("aten::max_pool2d_with_indices_backward.grad_input",
   F("max_pool2d_with_indices_backward.default"), _maxpool_backward_cases)
op("aten::_upsample_bilinear2d_aa.out", F("_upsample_bilinear2d_aa.default"),
   lambda rng, dt: [[arr(rng, s, dt, 0, 200), o, ac, sh, sw]
                    for s, o, sh, sw in (((1, 2, 8, 8), [3, 5], None, None),
                                         ((2, 3, 4, 5), [7, 9], None, None),
                                         ((1, 1, 9, 6), [2, 6], None, None),
                                         ((1, 2, 6, 6), [3, 3], 0.5, 0.5),
                                         ((1, 1, 5, 5), [1, 1], None, None),
                                         ((1, 1, 10, 3), [4, 4], None, None))
                    for ac in (False, True)], tols={U8: 1})


def _grid_cases(rng, dt):
    cases = []
    for mode in (0, 1, 2):
        for pad in (0, 1, 2):
            for ac in (False, True):
                x = arr(rng, (2, 3, 5, 6), dt)
                grid = arr(rng, (2, 4, 7, 2), dt, -1.3, 1.3)
                cases.append([x, grid, mode, pad, ac])
    return cases + [[arr(rng, (1, 2, 1, 1), dt), arr(rng, (1, 2, 2, 2), dt, -1, 1), 0, 2, True]]


# torch samples half/bfloat16 in that precision, step by step; the kernel in float32
op("aten::grid_sampler_2d.out", F("grid_sampler_2d.default"), _grid_cases, upcast=(F16, BF16))
for _n in ("reflection_pad3d", "replication_pad3d"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       cases_of([T((1, 2, 3, 4, 5)), [1, 2, 0, 1, 2, 1]], [T((2, 3, 4, 4)), [2, 2, 1, 1, 0, 2]],
                [T((1, 1, 2, 2, 2)), [0, 0, 0, 0, 0, 0]]))



def _cdist_cases(rng, dt):
    mm = [[arr(rng, (30, 4), dt), arr(rng, (3, 4), dt), 2.0, None],
          [arr(rng, (5, 3), dt), arr(rng, (4, 3), dt), 2.0, 1]]
    if dt in (F16, BF16):  # torch's half cdist exists only on the matrix-product path
        return mm[:1]
    return mm + [[arr(rng, a, dt), arr(rng, b, dt), p, None]
                 for a, b in (((4, 3), (5, 3)), ((2, 4, 3), (2, 6, 3)), ((0, 3), (4, 3)))
                 for p in (2.0, 1.0, 0.0, float("inf"), 3.0)]


op("aten::_cdist_forward.out", F("_cdist_forward.default"), _cdist_cases, tol=1e-4)
op("aten::_pdist_forward.out", F("_pdist_forward.default"),
   lambda rng, dt: [[arr(rng, s, dt), p] for s in ((5, 3), (2, 4), (1, 3))
                    for p in (2.0, 1.0, 0.0, float("inf"), 1.5)], tol=1e-5)

# FFTs (ExecuTorch's optimized library): dims are non-negative, as torch.fft passes them
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}


def _fft_cases(r2c):
    def gen(rng, dt):
        cases = []
        for shape, dims in (((8,), [0]), ((3, 8), [1]), ((3, 5, 8), [1, 2]), ((4, 6, 7), [0, 2]),
                            ((2, 3, 4, 5), [0, 1, 2, 3])):
            for norm in (0, 1, 2):
                if r2c:
                    cases += [[arr(rng, shape, dt), dims, norm, onesided] for onesided in (True, False)]
                    continue
                x = arr(rng, shape, dt)  # a Hermitian one-sided input: the r2c of a real signal
                if dt in _COMPLEX:
                    x = np.asarray(A._fft_r2c(to_torch(x), dims, 0, True).numpy())
                for n in (shape[dims[-1]], shape[dims[-1]] + 1 - shape[dims[-1]] % 2):
                    cases.append([x, dims, norm, n])
        return cases

    return gen


op("aten::_fft_r2c.out", F("_fft_r2c.default"), _fft_cases(True), tols={C64: 1e-5, C128: 1e-10})
op("aten::_fft_c2r.out", F("_fft_c2r.default"), _fft_cases(False))
