"""The "safe softmax" tail of an attention, one step at ``load_method`` (portable steps).

torch's scaled-dot-product attention decomposes into a softmax followed by a fix for rows the
mask hides completely (``torch._safe_softmax``): ``eq(scores, -inf)``, ``logical_not``,
``any(dim=-1, keepdim=True)``, ``logical_not`` (together: "is the whole row -inf?"),
``full_like(probs, 0)`` and ``where(that, zeros, probs)``. Six instructions, six NumPy calls
and five temporaries per attention layer for what is one pass over the rows:
``out[r] = 0 if every scores[r] is -inf else probs[r]``. With the compiled loops (the
``accel`` extra) that pass replaces the six; the values are the same, bit for bit (a copy of
``probs`` or +0.0; NaN scores are not -inf, as ``eq`` says).

It applies when the graph allows: the six instructions are consecutive, each intermediate is
written once and read only by the next one (not a method output, and no value sharing its
bytes is read later), the scores, probabilities and result are static float tensors of one
shape, C-contiguous, and the result shares no bytes with the other two but all of one's
(the loop reads a row of each before it writes that row). The step runs where
the first of the six ran (the scores may be dead afterwards, their bytes reused by the
temporaries). The ``full_like`` keeps running where a value sharing its bytes may be read
later (a delegate's arguments count as read: they are its outputs too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..kernels import accel
from ..kernels.portable import norm_accel
from . import fold_bn

if TYPE_CHECKING:
    from .method import Method

EQ, NOT, ANY = "aten::eq.Scalar_out", "aten::logical_not.out", "aten::any.out"
FULL_LIKE, WHERE = "aten::full_like.out", "aten::where.self_out"
_SIX = sorted((EQ, NOT, ANY, NOT, FULL_LIKE, WHERE))  # the tail's kernels, in any order
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse(m: Method, fixed: set[int], once: set[int], facts: fold_bn.Facts
         ) -> dict[int, list[Callable[[], Any]]]:
    """Instruction index -> its replacement steps, for each safe-softmax tail."""
    if not accel.available():
        return {}
    recs = m.records
    plan: dict[int, list[Callable[[], Any]]] = {}
    for k in range(len(recs) - 5):
        if recs[k].name == EQ:
            steps = _tail(m, recs[k:k + 6], fixed, once, facts)
            if steps is not None:
                plan.update((i, new) for i, new in steps.items() if new is not None)
    return plan


def _tail(m: Method, block, fixed: set[int], once: set[int], facts: fold_bn.Facts
          ) -> dict[int, list[Callable[[], Any]] | None] | None:
    """Instruction -> its steps (None: its own) for the six of ``block``, or None."""
    if any(r.kind != "kernel" for r in block) or sorted(r.name for r in block) != _SIX:
        return None
    eq = block[0]
    by_name: dict[str, list[Any]] = {}
    for r in block:
        by_name.setdefault(r.name, []).append(r)
    (anyr,), (full,), (where,) = by_name[ANY], by_name[FULL_LIKE], by_name[WHERE]
    vals = m._vals
    x, neg, c1 = eq.args[0], vals[eq.args[1]], eq.outputs[0]
    if neg != -math.inf or len(eq.args) != 3:  # (args: inputs, then the out)
        return None
    not1 = next((r for r in by_name[NOT] if r.args[0] == c1), None)
    if not1 is None or anyr.args[0] != not1.outputs[0] or len(anyr.args) != 4:
        return None
    c3 = anyr.outputs[0]
    not2 = next((r for r in by_name[NOT] if r is not not1), None)
    if not2 is None or not2.args[0] != c3 or len(where.args) != 4:
        return None
    cond, zeros, s = where.args[:3]
    if cond != not2.outputs[0] or zeros != full.outputs[0] or full.args[0] != s:
        return None
    if vals[full.args[1]] != 0 or any(not isinstance(vals[i], np.ndarray) for i in (x, s)):
        return None
    out = where.outputs[0]
    xa, sa, oa = vals[x], vals[s], vals[out]
    if not all(i in fixed for i in (x, s, out)) or not (
            xa.dtype == sa.dtype == oa.dtype and xa.dtype in _FLOATS
            and xa.shape == sa.shape == oa.shape and xa.ndim >= 1 and xa.shape[-1] > 0
            and all(a.flags.c_contiguous for a in (xa, sa, oa))):
        return None
    if vals[anyr.args[1]] not in (-1, xa.ndim - 1) or vals[anyr.args[2]] is not True:
        return None
    # every intermediate: one writer, read by the next instruction alone, no alias read
    reads, spans = facts.reads, facts.where
    for v, writer, reader in ((c1, eq, not1), (not1.outputs[0], not1, anyr), (c3, anyr, not2),
                              (cond, not2, where), (zeros, full, where)):
        if v not in once or reads.get(v) != [reader.index]:
            return None
        if v != zeros and fold_bn.alias_read(m, v, writer.index, spans):
            return None
    # The zeros stay written where a value sharing their bytes may be read later (a
    # delegate's arguments count as read); they must not overwrite the result then.
    keep = fold_bn.alias_read(m, zeros, full.index, spans)
    span = spans.get(out)
    if span is None or keep and fold_bn.touched(m, [zeros], span, spans):
        return None
    for v in (x, s):  # the result may take the very bytes of an input (one row at a time)
        if spans.get(v) != span and fold_bn.touched(m, [v], span, spans):
            return None
    n = xa.shape[-1]
    step = partial(norm_accel.masked_rows_zero, xa.reshape(-1, n), sa.reshape(-1, n),
                   oa.reshape(-1, n))
    return {eq.index: [step], full.index: None if keep else [],
            **{r.index: [] for r in block if r is not eq and r is not full}}
