"""Indexing, shape/copy, creation, dim-order and prim-op records."""

from __future__ import annotations

import math
import operator

import numpy as np
import torch
from kernel_harness import (
    ALL_DTYPES,
    C64,
    C128,
    F32,
    F64,
    I32,
    I64,
    OPS,
    U8,
    UNARY_SHAPES,
    A,
    B,
    Case,
    F,
    T,
    arr,
    cases_of,
    const,
    idx,
    isfloat,
    op,
    unary,
)

# indexing
op("aten::embedding.out", F("embedding.default"),
   cases_of([T((10, 4)), T((3, 5), 0, 10, I64), -1, False, False],
            [T((10, 4)), T((), 0, 10, I64), -1, False, False],
            [T((6, 3)), T((4,), 0, 6, I32), 2, False, False],
            [T((6, 3)), T((0,), 0, 6, I64), -1, False, False]))
op("aten::index_select.out", F("index_select.default"),
   cases_of([T((4, 5)), 0, idx([3, 0, 0])], [T((4, 5)), 1, idx(2)], [T((4, 5, 2)), -1, idx([1], I32)],
            [T((4, 5)), 0, idx([], I64)], [T(()), 0, idx([0])]))
op("aten::index.Tensor_out", F("index.Tensor"),
   cases_of([T((4, 5, 6)), [idx([3, 0, -1])]], [T((4, 5, 6)), [None, idx([[1, 2], [0, 4]])]],
            [T((4, 5, 6)), [idx([3, 0, 1]), None, idx([5, 0, 2])]],
            [T((4, 5, 6)), [idx([True, False, True, True], B)]],
            [T((4, 5, 6)), [idx([[1], [2]]), idx([0, 1, 4], I32)]],
            [T((4, 5)), [None, idx([], I64)]]))
op("aten::index_put.out", F("index_put.default"),
   cases_of([T((4, 5)), [idx([3, 0])], T((2, 5)), False],
            [T((4, 5)), [idx([3, 0, 3]), idx([1, 1, 1])], T((3,)), True],
            [T((4, 5)), [None, idx([4, 0])], T((4, 2)), False],
            [T((4, 5)), [idx([True, False, True, False], B)], T(()), False]))
op("aten::gather.out", F("gather.default"),
   cases_of([T((3, 4)), 1, idx([[0, 3], [1, 1], [2, 0]]), False],
            [T((3, 4)), 0, idx([[2, 0, 1, 1]]), False], [T((3, 4)), -1, idx([[1], [0]]), False],
            [T(()), 0, idx(0), False], [T((3, 4)), 1, idx(np.zeros((3, 0))), False]))


def _perm_rows(rng, rows, n, k):
    return np.stack([rng.permutation(n)[:k] for _ in range(rows)]).astype(I64)


op("aten::scatter.src_out", F("scatter.src"),
   lambda rng, dt: [[arr(rng, (3, 5), dt), 1, _perm_rows(rng, 3, 5, 2), arr(rng, (3, 4), dt)],
                    [arr(rng, (4, 3), dt), 0, _perm_rows(rng, 3, 4, 4).T.copy()[:2],
                     arr(rng, (2, 3), dt)],
                    [arr(rng, (), dt), 0, np.array(0), arr(rng, (), dt)]])
op("aten::scatter.value_out", F("scatter.value"),
   lambda rng, dt: [[arr(rng, (3, 5), dt), 1, _perm_rows(rng, 3, 5, 2), 7],
                    [arr(rng, (3, 5), dt), -1, _perm_rows(rng, 2, 5, 3), -1.0 if dt == F32 else 2]])
op("aten::scatter_add.out", F("scatter_add.default"),
   cases_of([T((3, 5)), 1, idx([[0, 0, 4], [1, 1, 1], [2, 3, 2]]), T((3, 4))],
            [T((4, 2)), 0, idx([[0, 1], [0, 1], [3, 3]]), T((3, 2))]))
op("aten::masked_fill.Scalar_out", F("masked_fill.Scalar"),
   cases_of([T((3, 4)), T((3, 4), dtype=B), 2], [T((3, 4)), T((4,), dtype=B), -1],
            [T(()), T((), dtype=B), 0], [T((0, 4)), T((4,), dtype=B), 1]))
op("aten::masked_select.out", F("masked_select.default"),
   cases_of([T((3, 4)), T((3, 4), dtype=B)], [T((3, 4)), T((4,), dtype=B)], [T(()), T((), dtype=B)]))
op("aten::nonzero.out", F("nonzero.default"),
   cases_of([T((3, 4), -1, 2)], [T((5,), -1, 2)], [T((0, 3))], [T((2, 2, 3), -1, 2)]))

# shape and copy ops
op("aten::clone.out", F("clone.default"), unary(variants=[(None,)]))
op("aten::alias_copy.out", F("alias_copy.default"), unary())
op("aten::detach_copy.out", F("detach_copy.default"), unary())
op("aten::lift_fresh_copy.out", F("lift_fresh_copy.default"), unary())


def _conversions(extra):
    """Every input dtype into every output dtype (the conversion is the copy into ``out``)."""

    def gen(rng, dt):
        cases = [Case([arr(rng, s, dt, -30, 30), *extra], None) for s in UNARY_SHAPES]
        for to in ALL_DTYPES:
            lo = 0 if to == U8 or dt == U8 else -30  # negative floats to uint8 are UB in C
            cases.append(Case([arr(rng, (3, 4), dt, lo, 30), *extra], to))
        return cases

    return gen


op("aten::_to_copy.out", lambda x, nb, mf: x.clone(), _conversions([False, None]))
op("aten::copy.out", F("copy.default"),
   cases_of([T((3, 4)), T((3, 4), dtype=I32), False], [T((2, 3, 4)), T((4,)), False],
            [T(()), T(()), False], [T((0, 2)), T((2,)), False]))
op("aten::view_copy.out", F("view_copy.default"),
   cases_of([T((3, 4)), [4, 3]], [T((2, 3, 4)), [-1, 4]], [T(()), [1, 1]], [T((0, 3)), [3, 0]],
            [T((1,)), []]))
op("aten::permute_copy.out", F("permute_copy.default"),
   cases_of([T((2, 3, 4)), [2, 0, 1]], [T((2, 3, 4)), [-1, 1, 0]], [T(()), []], [T((0, 3)), [1, 0]]))
op("aten::expand_copy.out", F("expand_copy.default"),
   cases_of([T((3, 1)), [3, 4], False], [T((3, 1)), [2, -1, 5], False], [T(()), [2, 2], False],
            [T((1, 0)), [3, 0], False]))
op("aten::t_copy.out", F("t_copy.default"), cases_of([T((3, 4))], [T((5,))], [T(())], [T((0, 2))]))
op("aten::transpose_copy.int_out", F("transpose_copy.int"),
   cases_of([T((2, 3, 4)), 0, 2], [T((2, 3, 4)), -1, 1], [T(()), 0, -1], [T((0, 3)), 0, 1]))
op("aten::unsqueeze_copy.out", F("unsqueeze_copy.default"),
   cases_of([T((2, 3)), 0], [T((2, 3)), -1], [T(()), 0], [T((0, 3)), 1]))
op("aten::squeeze_copy.dim_out", F("squeeze_copy.dim"),
   cases_of([T((2, 1, 3)), 1], [T((2, 1, 3)), 0], [T(()), 0], [T((1, 0)), -2]))
op("aten::squeeze_copy.dims_out", F("squeeze_copy.dims"),
   cases_of([T((1, 2, 1, 3)), [0, 2]], [T((1, 2, 1)), [-1, 1]], [T(()), [0]], [T((1, 0)), []]))
op("aten::squeeze_copy.out", F("squeeze_copy.default"),
   cases_of([T((1, 2, 1, 3))], [T(())], [T((1, 0, 1))]))
op("aten::slice_copy.Tensor_out", F("slice_copy.Tensor"),
   cases_of([T((5, 6)), 1, 1, 4, 1], [T((5, 6)), 0, -3, None, 2], [T((5, 6)), -1, None, -1, 3],
            [T((5, 6)), 0, 4, 2, 1], [T((5, 6)), 1, 2, 2**62, 1], [T((0, 2)), 0, 0, 1, 1]))
op("aten::select_copy.int_out", F("select_copy.int"),
   cases_of([T((3, 4)), 0, 2], [T((3, 4)), 1, -1], [T((4,)), 0, 1], [T((3, 0)), 0, 1]))
op("aten::narrow_copy.out", F("narrow_copy.default"),
   cases_of([T((5, 4)), 0, 1, 3], [T((5, 4)), 1, -2, 2], [T((5, 4)), 0, 5, 0]))
op("aten::diagonal_copy.out", F("diagonal_copy.default"),
   cases_of([T((4, 5)), 0, 0, 1], [T((4, 5)), 1, 1, 0], [T((2, 3, 4)), -1, 0, 2], [T((0, 3)), 0, 0, 1]))
op("aten::cat.out", F("cat.default"),
   cases_of([[T((2, 3)), T((4, 3))], 0], [[T((2, 3)), T((2, 1)), T((2, 0))], -1],
            [[T((2, 3)), T((0,))], 1], [[T((0,)), T((0,))], 0], [[T((2, 3, 4))], 1]))
OPS[-1].extra_cases = [[[np.ones((2, 2), I32), np.ones((1, 2), F32)], 0]]
op("aten::stack.out", F("stack.default"),
   cases_of([[T((2, 3)), T((2, 3))], 0], [[T((2, 3)), T((2, 3)), T((2, 3))], -1],
            [[T(()), T(())], 0], [[T((0, 2))], 1]))
op("aten::split_with_sizes_copy.out", F("split_with_sizes_copy.default"),
   cases_of([T((5, 4)), [2, 3], 0], [T((5, 4)), [1, 0, 3], -1], [T((0, 4)), [0, 0], 0]),
   kind="list_out")
op("aten::split_copy.Tensor_out", F("split_copy.Tensor"),
   cases_of([T((5, 4)), 2, 0], [T((5, 4)), 4, 1], [T((5, 4)), 10, 0], [T((0, 4)), 2, 0]),
   kind="list_out")
op("aten::unbind_copy.int_out", F("unbind_copy.int"),
   cases_of([T((3, 4)), 0], [T((3, 4)), -1], [T((2, 0)), 0]), kind="list_out")
op("aten::flip.out", F("flip.default"),
   cases_of([T((3, 4)), [0]], [T((2, 3, 4)), [0, -1]], [T(()), []], [T((0, 2)), [1]]))
op("aten::roll.out", F("roll.default"),
   cases_of([T((3, 4)), [1], [0]], [T((3, 4)), [2, -1], [1, 0]], [T((3, 4)), [5], []],
            [T((0, 2)), [1], [1]]))
op("aten::repeat.out", F("repeat.default"),
   cases_of([T((2, 3)), [2, 1]], [T((2, 3)), [2, 1, 3]], [T(()), [3]], [T((0, 2)), [2, 2]]))
op("aten::tril.out", F("tril.default"),
   cases_of([T((4, 5)), 0], [T((2, 4, 5)), 1], [T((4, 5)), -2], [T((0, 3)), 0]))
op("aten::triu.out", F("triu.default"),
   cases_of([T((4, 5)), 0], [T((2, 4, 5)), 1], [T((4, 5)), -2], [T((0, 3)), 0]))
op("aten::pixel_shuffle.out", F("pixel_shuffle.default"),
   cases_of([T((2, 8, 3, 3)), 2], [T((9, 2, 2)), 3], [T((1, 2, 4, 3, 3)), 2]))
op("aten::pixel_unshuffle.out", F("pixel_unshuffle.default"),
   cases_of([T((2, 2, 6, 6)), 2], [T((1, 6, 6)), 3]))
op("aten::select_scatter.out", F("select_scatter.default"),
   cases_of([T((3, 4)), T((4,)), 0, 1], [T((3, 4)), T((3,)), 1, -1], [T((2, 3, 4)), T((2, 4)), 1, 0]))
op("aten::slice_scatter.out", F("slice_scatter.default"),
   cases_of([T((5, 4)), T((2, 4)), 0, 1, 3, 1], [T((5, 4)), T((5, 2)), 1, None, None, 2],
            [T((5, 4)), T((0, 4)), 0, 2, 2, 1], [T((6, 2)), T((2, 2)), 0, -3, None, 2]))

# creation
def _created(*arg_lists):
    """Creation cases: the key dtype is the dtype of ``out``."""
    return lambda rng, dt: [Case(list(a), dt) for a in arg_lists]


def _arange(int_args, float_args):
    return lambda rng, dt: _created(*(int_args + (float_args if isfloat(dt) else [])))(rng, dt)


op("aten::full.out", lambda size, v: torch.full(size, v),
   _created([[2, 3], 1.5], [[], 2], [[0, 3], True], [[4], -1], [[2, 2], 0]))
op("aten::full_like.out", lambda x, v, mf: torch.full_like(x, v),
   lambda rng, dt: [[arr(rng, s, dt), 3, None] for s in UNARY_SHAPES]
   + [[arr(rng, (2, 3), dt), 1.5, None], [arr(rng, (2,), dt), True, None]])
op("aten::fill.Scalar_out", F("fill.Scalar"),
   lambda rng, dt: [[arr(rng, s, dt), 2] for s in UNARY_SHAPES] + [[arr(rng, (3,), dt), 0.5]])
op("aten::fill.Tensor_out", F("fill.Tensor"),
   lambda rng, dt: [[arr(rng, s, dt), arr(rng, (), dt)] for s in UNARY_SHAPES]
   + [[arr(rng, (3,), dt), arr(rng, (), F64)]])
op("aten::zeros.out", lambda size: torch.zeros(size), _created([[2, 3]], [[]], [[0, 4]]))
op("aten::ones.out", lambda size: torch.ones(size), _created([[2, 3]], [[]], [[0, 4]]))
op("aten::empty.out", lambda size, mf: torch.zeros(size), _created([[2, 3], None], [[0], None]))
op("aten::scalar_tensor.out", lambda s: torch.scalar_tensor(s),
   _created([2.5], [3], [True], [0], [-1.5]))
op("aten::arange.start_out", lambda a, b, c: torch.arange(a, b, c, dtype=torch.float64),
   _arange([[0, 5, 1], [2, 11, 3], [5, 0, -2], [3, 3, 1], [0, 2, 1]],
           [[0.0, 1.0, 0.1], [-1.5, 2.5, 0.5], [0.5, 3.0, 0.25]]))
op("aten::arange.out", lambda a: torch.arange(a, dtype=torch.float64),
   _arange([[5], [0], [2]], [[2.5]]))

# dim order ops (ExecuTorch)
op("dim_order_ops::_to_dim_order_copy.out", lambda x, nb, do: x.clone(),
   _conversions([False, None]))
op("dim_order_ops::_clone_dim_order.out", lambda x, nb, do: x.clone(),
   lambda rng, dt: [[arr(rng, s, dt), False, None] for s in UNARY_SHAPES]
   + [[arr(rng, (2, 3, 4, 5), dt), False, [0, 2, 3, 1]]])
op("dim_order_ops::_empty_dim_order.out", lambda size, do: torch.zeros(size),
   _created([[2, 3], None], [[1, 2, 3, 4], [0, 2, 3, 1]], [[0, 2], None]))

# prim ops: reference is Python's operator on the same scalars
_PAIRS = [(7, 2), (-7, 2), (7, -2), (7.5, 2), (3, 0.5), (-7.0, 2.0), (2, 7)]
for _n, _f in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
               ("floordiv", operator.floordiv), ("truediv", operator.truediv),
               ("mod", operator.mod), ("eq", operator.eq), ("gt", operator.gt),
               ("lt", operator.lt), ("ge", operator.ge), ("le", operator.le),
               ("sym_max", max), ("sym_min", min)):
    _pairs = _PAIRS if _n not in ("sym_max", "sym_min") else [p for p in _PAIRS
                                                              if isinstance(p[0], int)
                                                              and isinstance(p[1], int)]
    op(f"executorch_prim::{_n}.Scalar", _f, cases_of(*[list(p) for p in _pairs]), kind="scalar")
op("executorch_prim::floordiv.int", lambda a, b: int(a / b),
   cases_of([7, 2], [-7, 2], [7, -2], [6, 3]), kind="scalar")
op("executorch_prim::mod.int", lambda a, b: int(math.fmod(a, b)),
   cases_of([7, 2], [-7, 2], [7, -2], [6, 3]), kind="scalar")
op("executorch_prim::neg.Scalar", operator.neg, cases_of([3], [-2.5], [0]), kind="scalar")
op("executorch_prim::sym_float.Scalar", float, cases_of([3], [2.5], [True]), kind="scalar")
op("executorch_prim::sym_int.Scalar", int, cases_of([3], [2.7], [-2.7], [True]), kind="scalar")
op("executorch_prim::ceil.Scalar", math.ceil, cases_of([2.1], [-2.1], [3.0]), kind="scalar")
op("executorch_prim::round.Scalar", round, cases_of([2.5], [3.5], [-2.5], [2.4]), kind="scalar")
op("executorch_prim::trunc.Scalar", math.trunc, cases_of([2.7], [-2.7]), kind="scalar")
op("executorch_prim::sym_not.Scalar", operator.not_, cases_of([True], [False]), kind="scalar")
op("executorch_prim::sym_ite.Scalar", lambda b, t, f: t if b else f,
   cases_of([True, 1, 2], [False, 1.5, 2.5]), kind="scalar")
op("aten::sym_size.int", lambda t, d: t.shape[d],
   cases_of([T((2, 3, 4)), 1], [T((2, 3, 4)), -1], [T((0, 5)), 0]), kind="scalar")
op("aten::sym_numel", lambda t: t.numel(), cases_of([T((2, 3, 4))], [T(())], [T((0, 5))]),
   kind="scalar")
op("aten::_local_scalar_dense", lambda t: t.item(),
   cases_of([T(())], [T((1, 1))]), kind="scalar")
op("executorch_prim::et_view.default", lambda t, size: t.reshape(size),
   cases_of([T((2, 3, 4)), [6, 4]], [T((2, 3, 4)), [-1, 2]], [T(()), [1]], [T((0, 3)), [3, 0]]), kind="view")


# ---- operators added for ExecuTorch 1.5's full portable list ---------------------------

op("aten::as_strided_copy.out", F("as_strided_copy.default"),
   cases_of([T((4, 5)), [2, 3], [5, 1], None], [T((4, 5)), [3, 3], [1, 5], 2],
            [T((6,)), [3, 2], [1, 1], 1], [T((2, 3)), [0, 2], [1, 1], None],
            [T((2, 3)), [], [], 4], [T((3, 4)), [2, 2, 2], [4, 1, 0], 1]))
op("aten::unfold_copy.out", F("unfold_copy.default"),
   cases_of([T((5, 6)), 1, 2, 2], [T((5, 6)), 0, 3, 1], [T((4,)), 0, 4, 3], [T(()), 0, 1, 1],
            [T((5, 0)), 0, 2, 1], [T((2, 7, 3)), -2, 3, 2]))
op("aten::view_as_real_copy.out", F("view_as_real_copy.default"),
   cases_of([T((3, 4))], [T(())], [T((0, 2))]), other_dtypes=(C64, C128))
for _n in ("_h2d_copy", "_d2h_copy"):
    op(f"et_copy::{_n}.out", lambda x: x.clone(), unary())
op("aten::copy_", lambda s, src, nb: s.clone().copy_(src),
   cases_of([T((3, 4)), T((3, 4), dtype=I32), False], [T((2, 3, 4)), T((4,)), False],
            [T(()), T(()), False], [T((0, 2)), T((2,)), False], [T((2, 2)), T((), dtype=F64), True]),
   kind="inplace")
op("aten::index_put_", lambda s, ind, v, acc: A.index_put_(s.clone(), ind, v, acc),
   cases_of([T((4, 5)), [idx([3, 0])], T((2, 5)), False],
            [T((4, 5)), [idx([3, 0, 3]), idx([1, 1, 1])], T((3,)), True],
            [T((4, 5)), [None, idx([4, 0])], T((4, 2)), False],
            [T((4, 5)), [idx([True, False, True, False], B)], T(()), False]), kind="inplace")
op("executorch_prim::et_copy_index.tensor",
   lambda to, frm, i: torch.cat([to[:i], frm[None]]) if to.ndim > 1 else torch.cat(
       [to[:i], frm[None]]),
   cases_of([T((4, 3)), T((3,)), 0], [T((4, 3)), T((3,)), 2], [T((5,)), T(()), 4],
            [T((2, 2, 3)), T((2, 3)), 1]), kind="inplace")
op("aten::masked_scatter.out", F("masked_scatter.default"),
   cases_of([T((3, 4)), T((3, 4), dtype=B), T((12,))], [T((3, 4)), T((4,), dtype=B), T((20,))],
            [T(()), T((), dtype=B), T((2,))], [T((2, 1)), T((3,), dtype=B), T((2, 3))],
            [T((0, 4)), T((4,), dtype=B), T((1,))]))
op("aten::repeat_interleave.Tensor_out", F("repeat_interleave.Tensor"),
   cases_of([const([1, 0, 3, 2]), None], [const([2, 2]), 4], [const([3]), None],
            [const([]), None], [const([0, 0]), None]))


def _uniform_check(args, outs):
    (r,) = outs
    v = r.astype(np.float64)
    assert np.all((v >= 0) & (v < 1)), "rand: values outside [0, 1)"
    if v.size >= 1000:
        assert abs(v.mean() - 0.5) < 0.05 and abs(v.std() - 12 ** -0.5) < 0.05


def _normal_check(args, outs):
    (r,) = outs
    v = r.astype(np.float64)
    assert np.all(np.isfinite(v))
    if v.size >= 1000:
        assert abs(v.mean()) < 0.15 and abs(v.std() - 1) < 0.1, (v.mean(), v.std())


def _dropout_check(args, outs):
    x, p, train = args
    y, mask = outs
    assert mask.dtype == B or x.size == 0  # torch: an empty input gets a mask like it
    xf, yf = x.astype(np.float64), y.astype(np.float64)
    if train is False:
        assert mask.all() and np.array_equal(yf, xf)
        return
    want = np.where(mask, xf / (1 - p) if p < 1 else 0, 0)
    np.testing.assert_allclose(yf, want, rtol=1e-2, atol=1e-2)
    if x.size >= 1000:
        assert abs(mask.mean() - (1 - p)) < 0.05, (mask.mean(), p)


_SIZES = ([[2, 3]], [[4000]], [[]], [[0, 3]])
op("aten::rand.out", lambda size, dtype: torch.rand(size, dtype=dtype), _created(*_SIZES),
   kind="random", check=_uniform_check, dtype_ref=True)
op("aten::randn.out", lambda size, dtype: torch.randn(size, dtype=dtype), _created(*_SIZES),
   kind="random", check=_normal_check, dtype_ref=True)


def _dropout_cases(rng, dt):
    cases = [[T((3, 4)), 0.5, False], [T((0, 2)), 0.5, False]]
    if isfloat(dt):  # torch drops out floating point tensors only
        cases += [[T((4000,)), 0.3, True], [T((3, 4)), 0.0, True], [T((5,)), 1.0, True],
                  [T((2000,)), 0.5, None], [T((0, 2)), 0.5, True]]
    return cases_of(*cases)(rng, dt)


op("aten::native_dropout.out", F("native_dropout.default"), _dropout_cases, kind="random",
   check=_dropout_check)
