"""Chains of nodes the plan (``plan.py``) runs as one step, found once at delegate init.

Each pattern is matched on the lowered nodes (their :class:`~.nodes.Op` functions and
slots), never across a value that another node, or the method, also reads. A fusion computes
exactly what its nodes compute, in float32, with the same roundings, so the plan stays
bit-identical to the reference path (which runs the nodes one by one):

- rotate-half RoPE, ``cat(x1*cos - x2*sin, x1*sin + x2*cos)`` of the two halves of ``x``
  (9 nodes, twice per attention layer of a llama-style graph): one compiled loop over a 4-D
  ``x``, else its six multiplications and additions written into the halves of the output;
- the tail of RMSNorm, ``x * rsqrt(mean + eps) * w`` (4 nodes; the mean itself is a portable
  op in ExecuTorch's graphs): one compiled loop (``kernels_fused``) when numba is there;
- attention's ``softmax(scores / c + mask)`` (or ``scores * c``; 3 nodes per layer): the scale
  and the mask in one compiled pass, then the softmax's own compiled passes and exp
  (``kernels_fused.masked_softmax``), when numba is there;
- a batched matmul of heads laid out by views (attention's ``[B, S, H, D]`` projections
  permuted to ``[B, H, S, D]`` and reshaped to ``[B*H, S, D]``, and its result permuted back
  and reshaped to ``[B, S, H*D]``): the reshapes that would copy a permuted view are skipped,
  the GEMMs read the permuted heads where they lie and write straight into the rows of the
  final layout (BLAS's leading dimensions), checked at plan time to give the same bits.

``prepare(values)`` is called at plan time with this call's input values; it returns the
fused function and its extra arguments (buffers, expanded constants) or None when the values
do not fit (the plan then runs the nodes one by one).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import schema as x
from . import kernels_fused as KF
from .nodes import _CONCAT, OUT, VIEW, Lowered, _rsqrt
from .nodes_nn import _bmm_t

F32 = np.dtype(np.float32)
Prepared = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass
class Fusion:
    name: str
    nodes: tuple[int, ...]  # the nodes it stands for, ascending; the last one writes ``out``
    ins: tuple[int, ...]  # the slots it reads (all defined before ``nodes[0]`` runs)
    out: int
    prepare: Callable[[list[np.ndarray]], Prepared | None]


class _Graph:
    """Who produces and who reads each slot, for the matchers."""

    def __init__(self, nodes: list[Lowered], node_slots: list[tuple[int, ...]],
                 consts: list[Any], external: set[int]) -> None:
        self.nodes, self.consts = nodes, consts
        self.producer: dict[int, int] = {}
        self.uses: dict[int, int] = {}
        self.reader: dict[int, int] = {}  # slot -> the (last) node reading it
        for k, (rec, slots) in enumerate(zip(nodes, node_slots)):
            self.producer[rec.out] = k
            for s in slots:
                if s != rec.out:
                    self.uses[s] = self.uses.get(s, 0) + 1
                    self.reader[s] = k
        for s in external:  # read by the method: never an inner value of a fusion
            self.uses[s] = self.uses.get(s, 0) + 1000

    def op(self, slot: int, fn: Any, uses: int = 1) -> tuple[int, Any] | None:
        """(node, op) producing ``slot`` with ``fn`` (float32, no clamp), read ``uses`` times."""
        k = self.producer.get(slot)
        if k is None or self.uses.get(slot, 0) != uses:
            return None
        rec = self.nodes[k]
        op = rec.op
        if op is None or op.fn is not fn or rec.dtype != F32 or rec.lo != -math.inf or \
                rec.hi != math.inf:
            return None
        return k, op

    def const(self, slot: int) -> bool:
        return self.consts[slot] is not None


def find(nodes: list[Lowered], node_slots: list[tuple[int, ...]], consts: list[Any],
         external: set[int]) -> dict[int, Fusion]:
    """Every node covered by a fusion -> its fusion."""
    g = _Graph(nodes, node_slots, consts, external)
    found: dict[int, Fusion] = {}
    for k in range(len(nodes)):
        for match in (_rope, _rms_tail, _masked_softmax, _bmm_views):
            f = match(g, k)
            if f is not None and not any(j in found for j in f.nodes):
                found.update((j, f) for j in f.nodes)
                break
    return found


# ---- rotate-half RoPE ---------------------------------------------------------------------


def _halves(g: _Graph, m: Any) -> tuple[int, int, int] | None:
    """A multiply of a slice by a factor: (slice node, sliced slot, factor slot)."""
    for a, c in ((0, 1), (1, 0)):
        sl = g.op(m.ins[a], operator.getitem, uses=2)
        if sl is not None and g.producer.get(m.ins[c]) != sl[0]:
            return sl[0], sl[1].ins[0], m.ins[c]
    return None


def _rope(g: _Graph, k: int) -> Fusion | None:
    """``cat(x1*c - x2*s, x1*s + x2*c)`` with ``x1``, ``x2`` the halves of ``x``'s last axis."""
    rec = g.nodes[k]
    if rec.op is None or rec.op.fn is not _CONCAT[2] or rec.dtype != F32:
        return None
    sub = g.op(rec.op.ins[0], np.subtract)
    add = g.op(rec.op.ins[1], np.add)
    if sub is None or add is None:
        return None
    muls = [g.op(s, np.multiply) for s in (*sub[1].ins, *add[1].ins)]
    if any(m is None for m in muls):
        return None
    parts = [_halves(g, m[1]) for m in muls]  # type: ignore[index]
    if any(p is None for p in parts):
        return None
    (s1, x, c), (s2, x_, s), (s3, x3, s_), (s4, x4, c_) = parts  # type: ignore[misc]
    if (s3, s4) == (s2, s1):  # the add's operands the other way round
        (s3, x3, s_), (s4, x4, c_) = (s4, x4, c_), (s3, x3, s_)
    if not (x == x_ == x3 == x4 and s3 == s1 and s4 == s2 and s1 != s2 and c == c_ and
            s == s_):
        return None
    first, second = g.nodes[s1].op.extra[0], g.nodes[s2].op.extra[0]  # type: ignore[union-attr]
    axis = rec.op.extra[0]
    nodes = tuple(sorted({s1, s2, sub[0], add[0], k, *(m[0] for m in muls)}))  # type: ignore[index]
    if any(g.producer.get(v) in nodes for v in (x, c, s)):
        return None
    return Fusion("rope", nodes, (x, c, s), rec.out,
                  lambda vals: _rope_prepare(vals, first, second, axis))


def _rope_prepare(vals: list[np.ndarray], first: tuple[slice, ...], second: tuple[slice, ...],
                  axis: int) -> Prepared | None:
    x, c, s = vals
    rank = x.ndim
    if x.dtype != F32 or c.dtype != F32 or s.dtype != F32 or axis != rank - 1 or \
            len(first) != rank or len(second) != rank:
        return None
    n = x.shape[-1]
    h = n // 2
    whole = [slice(0, d) for d in x.shape[:-1]]
    # the slices must be the two halves of the last axis, whole along the others
    if n % 2 or list(first) != [*whole, slice(0, h)] or list(second) != [*whole, slice(h, n)]:
        return None
    half = x.shape[:-1] + (h,)
    if np.broadcast_shapes(half, c.shape, s.shape) != half:
        return None
    if KF.compiled() and rank == 4 and c.ndim <= 4 and s.ndim <= 4:
        return KF.rope4, (h,)
    return _rope_numpy, (np.empty(half, F32), h)


def _rope_numpy(x, c, s, t, h, out=None):
    """The nodes' own operations, into the halves of the output (no concatenation)."""
    if out is None:
        out = np.empty(x.shape, F32)
    x1, x2, o1, o2 = x[..., :h], x[..., h:], out[..., :h], out[..., h:]
    np.multiply(x1, c, out=o1)
    np.multiply(x2, s, out=t)
    np.subtract(o1, t, out=o1)
    np.multiply(x1, s, out=o2)
    np.multiply(x2, c, out=t)
    np.add(o2, t, out=o2)
    return out


# ---- RMSNorm's tail -----------------------------------------------------------------------


def _rms_tail(g: _Graph, k: int) -> Fusion | None:
    """``(x * rsqrt(m + eps)) * w``, as ExecuTorch lowers RMSNorm after its mean."""
    rec = g.nodes[k]
    if rec.op is None or rec.op.fn is not np.multiply or rec.dtype != F32 or \
            rec.lo != -math.inf or rec.hi != math.inf:
        return None
    for a, b in ((0, 1), (1, 0)):
        w, inner = rec.op.ins[b], g.op(rec.op.ins[a], np.multiply)
        if inner is None:
            continue
        for i, j in ((0, 1), (1, 0)):
            x, r = inner[1].ins[i], g.op(inner[1].ins[j], _rsqrt)
            if r is None:
                continue
            add = g.op(r[1].ins[0], np.add)
            if add is None:
                continue
            nodes = (add[0], r[0], inner[0], k)
            ins = (x, *add[1].ins, w)
            if not any(g.producer.get(v) in nodes for v in ins):
                return Fusion("rms_tail", tuple(sorted(nodes)), ins, rec.out, _rms_prepare)
    return None


def _rms_prepare(vals: list[np.ndarray]) -> Prepared | None:
    x, a, b, w = vals
    if not KF.compiled() or any(v.dtype != F32 for v in vals) or x.ndim < 1 or \
            not x.flags.c_contiguous:
        return None
    n, rows = x.shape[-1], x.shape[:-1] + (1,)
    if w.size != n or w.shape[-1:] != (n,) or not w.flags.c_contiguous:
        return None
    for m, eps in ((a, b), (b, a)):  # (m + eps: either order, the same sum)
        if m.shape == rows and m.flags.c_contiguous and eps.size == 1:
            return (_rms_ab if m is a else _rms_ba), ()
    return None


def _rms_ab(x, m, eps, w, out=None):
    return KF.rms_tail(x, m, eps, w, out)


def _rms_ba(x, eps, m, w, out=None):
    return KF.rms_tail(x, m, eps, w, out)


# ---- attention's scaled, masked softmax ---------------------------------------------------


def _masked_softmax(g: _Graph, k: int) -> Fusion | None:
    """``softmax(x / c + m)`` or ``softmax(x * c + m)``, ``c`` a single value."""
    rec = g.nodes[k]
    if rec.op is None or getattr(rec.op.fn, "xnn_kind", None) is not x.XNNSoftmax or \
            rec.dtype != F32 or len(rec.op.ins) != 1:
        return None
    add = g.op(rec.op.ins[0], np.add)
    if add is None:
        return None
    for a, b in ((0, 1), (1, 0)):  # (scores + mask: either order, the same sum)
        for fn, divide in ((np.divide, True), (np.multiply, False)):
            scale = g.op(add[1].ins[a], fn)
            if scale is None or len(scale[1].ins) != 2:
                continue
            s, c = scale[1].ins
            if not divide and g.const(s) and not g.const(c):
                s, c = c, s  # (a product: either order)
            # (c: one value, checked per call; ExecuTorch's graphs pass it in as an input)
            nodes = (scale[0], add[0], k)
            ins = (s, c, add[1].ins[b])
            if not any(g.producer.get(v) in nodes for v in ins):
                return Fusion("masked_softmax", tuple(sorted(nodes)), ins, rec.out,
                              lambda vals, d=divide: _softmax_prepare(vals, d))
    return None


def _softmax_prepare(vals: list[np.ndarray], divide: bool) -> Prepared | None:
    return (KF.masked_softmax, (divide,)) if KF.masked_softmax_fits(*vals) else None


# ---- batched matmul of heads laid out by views ---------------------------------------------

_LAYOUT = (np.ndarray.reshape, np.ndarray.transpose)


def _bmm_views(g: _Graph, k: int) -> Fusion | None:
    """``[reshape(a)] @ [reshape(b)]`` (or ``@ b^T``), then ``reshape/transpose... reshape``
    of the product: each reshape or chain taken in only when only this product reads it."""
    rec = g.nodes[k]
    if rec.op is None or rec.op.fn not in (np.matmul, _bmm_t) or len(rec.op.ins) != 2 or \
            rec.op.extra or rec.dtype != F32 or rec.lo != -math.inf or rec.hi != math.inf:
        return None
    nodes, ins, shapes = [k], [], []
    for s in rec.op.ins:
        r = g.op(s, np.ndarray.reshape)
        if r is not None and r[1].kind == VIEW and not g.const(r[1].ins[0]):
            nodes.append(r[0])
            ins.append(r[1].ins[0])
            shapes.append(r[1].extra[0])
        else:
            ins.append(s)
            shapes.append(None)
    chain, out = [], rec.out
    while g.uses.get(out) == 1:  # the layout nodes reading the product, one after another
        j = g.reader[out]
        view = g.nodes[j].op
        if view is None or view.kind != VIEW or view.fn not in _LAYOUT or view.ins != (out,) \
                or g.op(g.nodes[j].out, view.fn, g.uses.get(g.nodes[j].out, 0)) is None:
            break
        chain.append((view.fn, view.extra))
        nodes.append(j)
        out = g.nodes[j].out
    while chain and chain[-1][0] is not np.ndarray.reshape:  # (ends where a copy is made)
        chain.pop()
        nodes.pop()
        out = g.nodes[nodes[-1]].out
    if len(nodes) == 1 or any(g.producer.get(v) in nodes for v in ins):
        return None
    transposed = rec.op.fn is _bmm_t
    return Fusion("bmm_views", tuple(sorted(nodes)), tuple(ins), out,
                  lambda vals: _bmm_views_prepare(vals, shapes, transposed, chain))


def _resolved(shape: tuple[int, ...], size: int) -> tuple[int, ...]:
    known = math.prod(d for d in shape if d != -1)
    return tuple(size // known if d == -1 and known else d for d in shape)


def _bmm_views_prepare(vals: list[np.ndarray], shapes: list[Any], transposed: bool,
                       chain: list[tuple[Any, tuple[Any, ...]]]) -> Prepared | None:
    """The heads' batch shape every operand can be viewed with, and where each product row
    goes in the chain's result; None when a view would need a copy or the bits differ."""
    if any(v.dtype != F32 or v.ndim < 3 for v in vals):
        return None
    batch = max((v.shape[:-2] for v in vals), key=len)
    n = math.prod(batch)
    for v, shape in zip(vals, shapes):
        if shape is not None:
            want = _resolved(shape, v.size)
            if want[-2:] != v.shape[-2:] or math.prod(want[:-2]) != n:
                return None  # (the reshape does more than merge the heads' batch axes)
        if math.prod(v.shape[:-2]) != n or not _viewable(v, batch + v.shape[-2:]):
            return None
    a, b = (v.reshape(batch + v.shape[-2:]) for v in vals)
    if transposed:
        b = np.swapaxes(b, -1, -2)
    if a.shape[-1] != b.shape[-2]:
        return None
    product = batch + (a.shape[-2], b.shape[-1])
    flat = math.prod(product)
    nodes_in = [v.reshape(_resolved(s, v.size)) if s else v for v, s in zip(vals, shapes)]
    if nodes_in[0].shape[:-2] != nodes_in[1].shape[:-2]:
        return None  # (the node broadcasts a batch axis)
    index = np.arange(flat, dtype=np.int64).reshape(nodes_in[0].shape[:-2] + product[-2:])
    for fn, extra in chain:
        index = fn(index, *extra)
    where = np.empty(flat, np.int64)
    where[np.ascontiguousarray(index).reshape(-1)] = np.arange(flat)
    where = where.reshape(product)
    strides = tuple(int(where[(0,) * i + (1,) + (0,) * (len(product) - i - 1)] - where.flat[0])
                    if d > 1 else 0 for i, d in enumerate(product))
    if where.flat[0] != 0 or not np.array_equal(
            np.lib.stride_tricks.as_strided(np.arange(flat, dtype=np.int64), product,
                                            [s * 8 for s in strides]), where):
        return None  # (the chain is not a strided layout of the product)
    heads = _Heads(batch, transposed, index.shape, tuple(s * 4 for s in strides))
    got = heads(*vals)
    want = (_bmm_t if transposed else np.matmul)(*nodes_in)  # the nodes one by one
    for fn, more in chain:
        want = fn(want, *more)
    if got.shape != want.shape or not np.array_equal(got, want, equal_nan=True):
        return None
    return heads, ()


def _viewable(v: np.ndarray, shape: tuple[int, ...]) -> bool:
    try:
        v.view().shape = shape  # (raises where the reshape would have to copy)
    except AttributeError:
        return False
    return True


class _Heads:
    """The product of the heads, each row written where the layout chain puts it. The views
    of the operands and of ``out`` are made again only when they are other arrays than at the
    last call (a plan passes its own buffers: made once)."""

    def __init__(self, batch: tuple[int, ...], transposed: bool, shape: tuple[int, ...],
                 strides: tuple[int, ...]) -> None:
        self.batch, self.transposed, self.shape, self.strides = batch, transposed, shape, strides
        self.last: tuple[Any, ...] = (None, None, None)
        self.views: tuple[np.ndarray, ...] = ()

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
                 ) -> np.ndarray:
        if out is None:
            out = np.empty(self.shape, F32)
        last = self.last
        if a is not last[0] or b is not last[1] or out is not last[2]:
            self.views = self._views(a, b, out)
            self.last = (a, b, out)
        np.matmul(*self.views)
        return out

    def _views(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, ...]:
        batch = self.batch
        a = a.reshape(batch + a.shape[-2:])
        b = b.reshape(batch + b.shape[-2:])
        if self.transposed:
            b = np.swapaxes(b, -1, -2)
        rows = np.ndarray(batch + (a.shape[-2], b.shape[-1]), F32, out, 0, self.strides)
        return a, b, rows


__all__ = ["OUT", "Fusion", "find"]
