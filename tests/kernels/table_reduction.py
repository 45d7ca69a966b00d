"""Reduction records: sum/mean/prod, min/max, arg*, any, var/std, softmax, cumsum, topk."""

from __future__ import annotations

import numpy as np
from kernel_harness import (
    F32,
    F64,
    F,
    T,
    arr,
    cases_of,
    const,
    isfloat,
    op,
    st,
)

# reductions
_RED = [((3, 4, 5), [1], False), ((3, 4, 5), [0, 2], True), ((3, 4, 5), None, False),
        ((3, 4, 5), [], False), ((3, 4, 5), [-1], True), ((), [0], False), ((0, 3), [0], False),
        ((0, 3), [1], True)]
op("aten::sum.IntList_out", F("sum.dim_IntList"),
   lambda rng, dt: [[arr(rng, s, dt), d, k, None] for s, d, k in _RED]
   + [[arr(rng, (3, 4), dt), [1], False, st(F64)]])


def _mean_dtype(dt):
    """torch's mean needs a floating dtype= for integer and bool inputs."""
    return None if isfloat(dt) else st(F32)


op("aten::mean.out", F("mean.dim"),
   lambda rng, dt: [[arr(rng, s, dt), d, k, _mean_dtype(dt)] for s, d, k in _RED]
   + [[arr(rng, (3, 4), dt), [0], True, st(F64)]])
op("aten::mean.dtype_out", F("mean.default"),
   lambda rng, dt: [[arr(rng, (3, 4), dt), _mean_dtype(dt)], [arr(rng, (), dt), _mean_dtype(dt)],
                    [arr(rng, (2, 3), dt), st(F64)]])
op("aten::prod.int_out", F("prod.dim_int"),
   lambda rng, dt: [[arr(rng, (3, 4), dt, -2, 3), 1, False, None],
                    [arr(rng, (3, 4), dt, -2, 3), -2, True, None],
                    [arr(rng, (), dt), 0, False, None], [arr(rng, (0, 2), dt), 0, False, None]])
op("aten::prod.out", F("prod.default"),
   cases_of([T((3, 4), -2, 3), None], [T(()), None], [T((0,)), None]))
_MINMAX = [((3, 4, 5), [1], False), ((3, 4, 5), [0, 2], True), ((3, 4, 5), [], False),
           ((), [0], False), ((0, 3), [1], False)]
for _n in ("amax", "amin"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       lambda rng, dt: [[arr(rng, s, dt), d, k] for s, d, k in _MINMAX]
       + ([[np.array([[1.0, np.nan], [2.0, 3.0]], dt), [1], False]] if isfloat(dt) else []))
for _n in ("argmax", "argmin"):
    op(f"aten::{_n}.out", F(f"{_n}.default"),
       lambda rng, dt: [[arr(rng, (3, 4, 5), dt), d, k]
                        for d, k in ((None, False), (None, True), (1, False), (-1, True))]
       + [[arr(rng, (), dt), 0, False], [arr(rng, (), dt), None, True],
          [arr(rng, (0, 3), dt), 1, False], [np.array([1, 3, 3, 0], dt), 0, False]]
       + ([[np.array([1.0, np.nan, 5.0, np.nan], dt), 0, False]] if isfloat(dt) else []))
for _n in ("max", "min"):
    op(f"aten::{_n}.dim_{_n}", F(f"{_n}.dim"),
       lambda rng, dt: [[arr(rng, (3, 4), dt), 1, False], [arr(rng, (3, 4, 2), dt), 0, True],
                        [arr(rng, (), dt), 0, False], [arr(rng, (0, 3), dt), 1, True],
                        [np.array([[2, 2, 1]], dt), 1, False]])
    op(f"aten::{_n}.unary_out", F(f"{_n}.default"),
       cases_of([T((3, 4))], [T(())], [T((2, 3, 4))]))
op("aten::any.out", F("any.dim"),
   lambda rng, dt: [[arr(rng, (3, 4), dt, -1, 2), 1, False], [arr(rng, (3, 4), dt, -1, 2), 0, True],
                    [arr(rng, (), dt), 0, False], [arr(rng, (0, 3), dt), 0, False]])
op("aten::any.dims_out", F("any.dims"),
   lambda rng, dt: [[arr(rng, (3, 4, 2), dt, -1, 2), d, k]
                    for d, k in (([1], False), ([0, 2], True), (None, False), ([], False))]
   + [[arr(rng, (0, 3), dt), [0], False]])
op("aten::any.all_out", F("any.default"),
   cases_of([T((3, 4), -1, 2)], [T(())], [T((0,))]))
_VAR = [((3, 4, 5), [1], None, False), ((3, 4, 5), [0, 2], 0, True), ((3, 4, 5), None, 1, False),
        ((3, 4, 5), [-1], 2, False), ((), None, 0, False), ((4,), [], 1, False)]
op("aten::var.correction_out", F("var.correction"),
   lambda rng, dt: [[arr(rng, s, dt), d, c, k] for s, d, c, k in _VAR])
op("aten::std.correction_out", F("std.correction"),
   lambda rng, dt: [[arr(rng, s, dt), d, c, k] for s, d, c, k in _VAR])
op("aten::var_mean.correction_out", F("var_mean.correction"),
   lambda rng, dt: [[arr(rng, s, dt), d, c, k] for s, d, c, k in _VAR])
op("aten::var.out", F("var.dim"),
   cases_of([T((3, 4, 5)), [1], True, False], [T((3, 4, 5)), [0, 2], False, True],
            [T((3, 4)), None, True, False]))


def _softmax_cases(rng, dt):
    cases = [[arr(rng, (3, 4, 5), dt), -1, False], [arr(rng, (3, 4, 5), dt), 0, False],
             [arr(rng, (), dt), 0, False], [arr(rng, (0, 5), dt), 1, False],
             [arr(rng, (4, 0), dt), 1, False], [np.asarray(arr(rng, (2, 3), dt) * 50), 1, False]]
    if isfloat(dt):
        masked = arr(rng, (2, 3, 5), dt)
        masked[..., 3:] = -np.inf  # attention-style masking
        masked[1, 2, :] = -np.inf  # a fully masked row gives nan, as in torch
        cases.append([masked, -1, False])
    return cases


op("aten::_softmax.out", F("_softmax.default"), _softmax_cases)
op("aten::_log_softmax.out", F("_log_softmax.default"), _softmax_cases)
op("aten::cumsum.out", F("cumsum.default"),
   lambda rng, dt: [[arr(rng, (3, 4), dt), 1, None], [arr(rng, (3, 4), dt), 0, None],
                    [arr(rng, (), dt), 0, None], [arr(rng, (0, 3), dt), 1, None],
                    [arr(rng, (2, 5), dt), -1, st(F64)]])


def distinct(shape):
    """A tensor without ties (sorting ties is where torch's index order is unspecified)."""

    def gen(rng, dt):
        n = int(np.prod(shape))
        v = rng.permutation(n) - (0 if np.dtype(dt).kind in "ub" else n // 2)
        return np.asarray((v * (0.5 if isfloat(dt) else 1)).reshape(shape)).astype(dt)

    return gen


op("aten::topk.values", F("topk.default"),
   cases_of([distinct((3, 6)), 3, -1, True, True], [distinct((3, 6)), 2, 0, False, True],
            [distinct((5,)), 5, 0, True, True], [distinct((4, 0)), 0, 1, True, True],
            [distinct((2, 3, 4)), 2, 1, False, True], [distinct(()), 1, 0, True, True]))




def _sort_cases(stable):
    def gen(rng, dt):
        cases = [[distinct((3, 6)), -1, False], [distinct((3, 6)), 0, True],
                 [distinct((2, 3, 4)), 1, True], [distinct((5,)), 0, False],
                 [distinct((4, 0)), 1, False], [distinct(()), 0, True]]
        if stable:  # ties keep their input order
            cases += [[lambda rng, dt: arr(rng, (4, 9), dt, 0, 3), -1, d] for d in (False, True)]
        if isfloat(dt):
            cases += [[const([1.0, np.nan, -2.0, np.inf, np.nan, -np.inf]), 0, d]
                      for d in (False, True)]
        cases = cases_of(*cases)(rng, dt)
        return [[c[0], True, *c[1:]] for c in cases] if stable else cases

    return gen


op("aten::sort.values", F("sort.default"), _sort_cases(False))
op("aten::sort.values_stable", F("sort.stable"), _sort_cases(True))
