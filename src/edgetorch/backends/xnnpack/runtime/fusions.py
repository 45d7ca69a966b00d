"""Chains of nodes the plan (``plan.py``) runs as one step, found once at delegate init.

Each fusion is a rule of ``runtime.optimize.patterns`` (a pattern of the lowered nodes' Op
functions and a builder), matched by the same engine as the method's fusions: it never
crosses a value that a node outside the chain, or the method, also reads, nor one a clamp or
another dtype than float32 computes (:class:`_Graph`). A fusion computes
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

import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....runtime.optimize.patterns import Match, Pattern, Rule, Var, apply
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
    """The lowered nodes as a graph for the pattern engine (``patterns.Graph``): a node's op
    is its Op function, its operands the slots it reads."""

    def __init__(self, nodes: list[Lowered], node_slots: list[tuple[int, ...]],
                 consts: list[Any], external: set[int]) -> None:
        self.nodes, self.consts, self.external = nodes, consts, external
        self._node_slots = node_slots

    @functools.cached_property
    def _producer(self) -> dict[int, int]:
        """(Made when a rule's last operation first matches: most graphs have none.)"""
        return {rec.out: k for k, rec in enumerate(self.nodes)}

    @functools.cached_property
    def _readers(self) -> dict[int, list[int]]:
        readers: dict[int, list[int]] = {}
        for k, (rec, slots) in enumerate(zip(self.nodes, self._node_slots)):
            for s in slots:
                if s != rec.out:
                    readers.setdefault(s, []).append(k)
        return readers

    def op(self, k: int) -> Any:
        """The Op function, or the XNNPACK node kind of a function made per node (softmax)."""
        op = self.nodes[k].op
        return None if op is None else getattr(op.fn, "xnn_kind", op.fn)

    def operands(self, k: int) -> tuple[int, ...]:
        op = self.nodes[k].op
        return () if op is None else op.ins

    def result(self, k: int) -> int:
        return self.nodes[k].out

    def producer(self, slot: int) -> int | None:
        return self._producer.get(slot)

    def sole_reader(self, slot: int) -> int | None:
        rs = self._readers.get(slot)
        return rs[0] if rs and len(rs) == 1 and slot not in self.external else None

    def inner(self, slot: int, writer: int, nodes: frozenset[int], aliased: bool) -> bool:
        """A value inside a chain: read by the chain alone, not by the method, and computed
        in float32 with no output clamp."""
        return slot not in self.external and _plain(self, writer) and \
            all(r in nodes for r in self._readers.get(slot, ()))

    def const(self, slot: int) -> bool:
        return self.consts[slot] is not None


def _plain(g: _Graph, k: int) -> bool:
    rec = g.nodes[k]
    return rec.dtype == F32 and rec.lo == -math.inf and rec.hi == math.inf


def _f32(g: _Graph, k: int) -> bool:
    return g.nodes[k].dtype == F32


def find(nodes: list[Lowered], node_slots: list[tuple[int, ...]], consts: list[Any],
         external: set[int]) -> dict[int, Fusion]:
    """Every node covered by a fusion -> its fusion."""
    g = _Graph(nodes, node_slots, consts, external)
    found: dict[int, Fusion] = {}
    for _, _, f in apply(g, RULES, range(len(nodes))):
        found.update((j, f) for j in f.nodes)
    return found


def _fusion(name: str, m: Match, ins: tuple[int, ...],
            prepare: Callable[[list[np.ndarray]], Prepared | None]) -> Fusion:
    return Fusion(name, m.nodes, ins, m.result, prepare)


# ---- rotate-half RoPE ---------------------------------------------------------------------


def _times(half: str, factor: str) -> Pattern:
    """``half * factor`` (either order), ``half`` a slice of ``x``."""
    return Pattern(np.multiply, (Pattern(operator.getitem, (Var("x"),), name=half),
                                 Var(factor)), commutative=True)


_ROPE = Pattern(_CONCAT[2], (
    Pattern(np.subtract, (_times("x1", "c"), _times("x2", "s"))),
    Pattern(np.add, (_times("x1", "s"), _times("x2", "c")), commutative=True)),
    name="cat", test=_f32)


def _rope(g: _Graph, m: Match) -> Fusion | None:
    """``cat(x1*c - x2*s, x1*s + x2*c)`` with ``x1``, ``x2`` the halves of ``x``'s last axis."""
    first = g.nodes[m["x1"]].op.extra[0]  # type: ignore[union-attr]
    second = g.nodes[m["x2"]].op.extra[0]  # type: ignore[union-attr]
    axis = g.nodes[m["cat"]].op.extra[0]  # type: ignore[union-attr]
    return _fusion("rope", m, (m["x"], m["c"], m["s"]),
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

_RMS_TAIL = Pattern(np.multiply, (Pattern(np.multiply, (Var("x"), Pattern(_rsqrt, (
    Pattern(np.add, (Var("a"), Var("b"))),))), commutative=True), Var("w")),
    commutative=True, test=_plain)


def _rms_tail(g: _Graph, m: Match) -> Fusion | None:
    """``(x * rsqrt(m + eps)) * w``, as ExecuTorch lowers RMSNorm after its mean."""
    return _fusion("rms_tail", m, (m["x"], m["a"], m["b"], m["w"]), _rms_prepare)


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


def _softmax_node(g: _Graph, k: int) -> bool:
    return _f32(g, k) and len(g.operands(k)) == 1


def _pair(g: _Graph, k: int) -> bool:
    return len(g.operands(k)) == 2


def _scaled_softmax(scale: Any) -> Pattern:
    """``softmax(scale(s, c) + m)`` (the sum either order), ``c`` a single value."""
    return Pattern(x.XNNSoftmax, (
        Pattern(np.add, (Pattern(scale, (Var("s"), Var("c")), test=_pair, commutative=False),
                         Var("m")), commutative=True),), test=_softmax_node)


def _masked_softmax(g: _Graph, m: Match, divide: bool) -> Fusion | None:
    """``softmax(x / c + m)`` or ``softmax(x * c + m)``, ``c`` one value (checked per call;
    ExecuTorch's graphs pass it in as an input)."""
    s, c = m["s"], m["c"]
    if not divide and g.const(s) and not g.const(c):
        s, c = c, s  # (a product: either order)
    return _fusion("masked_softmax", m, (s, c, m["m"]),
                   lambda vals: _softmax_prepare(vals, divide))


def _softmax_prepare(vals: list[np.ndarray], divide: bool) -> Prepared | None:
    return (KF.masked_softmax, (divide,)) if KF.masked_softmax_fits(*vals) else None


# ---- batched matmul of heads laid out by views ---------------------------------------------

_LAYOUT = (np.ndarray.reshape, np.ndarray.transpose)


def _product(g: _Graph, k: int) -> bool:
    op = g.nodes[k].op
    return _plain(g, k) and len(op.ins) == 2 and not op.extra  # type: ignore[union-attr]


def _heads_view(name: str) -> Pattern:
    """A reshape (a view) of a value that is no constant."""
    return Pattern(np.ndarray.reshape, (Var(name, lambda g, v: not g.const(v)),), name=f"r{name}",
                   test=lambda g, k: g.nodes[k].op.kind == VIEW)


def _heads(a: bool, b: bool) -> Pattern:
    """``[reshape(a)] @ [reshape(b)]`` (or ``@ b^T``), each reshape taken in or not."""
    return Pattern(frozenset({np.matmul, _bmm_t}), (_heads_view("a") if a else Var("a"),
                                                     _heads_view("b") if b else Var("b")),
                   name="mm", test=_product)


def _layout_tail(g: _Graph, k: int, value: int) -> bool:
    """A layout node reading the product (or the previous layout node) alone."""
    op = g.nodes[k].op
    return op is not None and op.kind == VIEW and op.fn in _LAYOUT and op.ins == (value,) \
        and _plain(g, k)


def _bmm_views(g: _Graph, m: Match) -> Fusion | None:
    """The product of the heads, each row written where the layout chain after it puts it;
    the chain must end with a reshape (where a copy is made)."""
    chain = [(g.nodes[j].op.fn, g.nodes[j].op.extra) for j in m.tail]  # type: ignore[union-attr]
    if (chain and chain[-1][0] is not np.ndarray.reshape) or len(m.nodes) == 1:
        return None
    shapes = [g.nodes[m.ops[f"r{v}"]].op.extra[0] if f"r{v}" in m.ops else None  # type: ignore[union-attr]
              for v in ("a", "b")]
    transposed = g.nodes[m["mm"]].op.fn is _bmm_t  # type: ignore[union-attr]
    return _fusion("bmm_views", m, (m["a"], m["b"]),
                   lambda vals: _bmm_views_prepare(vals, shapes, transposed, chain))


RULES = [
    Rule("rope", _ROPE, _rope),
    Rule("rms_tail", _RMS_TAIL, _rms_tail),
    Rule("masked_softmax", _scaled_softmax(np.divide), lambda g, m: _masked_softmax(g, m, True)),
    Rule("masked_softmax", _scaled_softmax(np.multiply),
         lambda g, m: _masked_softmax(g, m, False)),
    *(Rule("bmm_views", _heads(a, b), _bmm_views, tail=_layout_tail)
      for a, b in ((True, True), (True, False), (False, True), (False, False))),
]


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
