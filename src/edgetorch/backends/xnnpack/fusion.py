"""Chains of nodes the plan (``plan.py``) runs as one step, found once at delegate init.

Each pattern is matched on the lowered nodes (their :class:`~.lowering.Op` functions and
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
  (``kernels_fused.masked_softmax``), when numba is there.

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

from . import kernels_fused as KF
from . import schema as x
from .lowering import _CONCAT, OUT, Lowered, _rsqrt

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
        for k, (rec, slots) in enumerate(zip(nodes, node_slots)):
            self.producer[rec.out] = k
            for s in slots:
                if s != rec.out:
                    self.uses[s] = self.uses.get(s, 0) + 1
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
        for match in (_rope, _rms_tail, _masked_softmax):
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


__all__ = ["OUT", "Fusion", "find"]
