"""The "safe softmax" tail of an attention, one step (with the compiled loops).

torch's scaled-dot-product attention decomposes into a softmax followed by a fix for rows the
mask hides completely (``torch._safe_softmax``): ``eq(scores, -inf)``, ``logical_not``,
``any(dim=-1, keepdim=True)``, ``logical_not`` (together: "is the whole row -inf?"),
``full_like(probs, 0)`` and ``where(that, zeros, probs)``. Six instructions, six NumPy calls
and five temporaries per attention layer for what is one pass over the rows:
``out[r] = 0 if every scores[r] is -inf else probs[r]``. With the compiled loops (the
``accel`` extra) that pass replaces the six; the values are the same, bit for bit (a copy of
``probs`` or +0.0; NaN scores are not -inf, as ``eq`` says).

The rule (:data:`RULE`) is the six as a pattern; the engine checks that each intermediate is
written once and read only inside the tail (not a method output, no value sharing its bytes
read later); the builder checks the values: the six consecutive, the scores, probabilities and
result static float tensors of one shape, C-contiguous, the result sharing no bytes with the
other two but all of one's (the loop reads a row of each before it writes that row). The step
runs where the first of the six ran (the scores may be dead afterwards, their bytes reused by
the temporaries). The ``full_like`` keeps running where a value sharing its bytes may be read
later (a delegate's arguments count as read: they are its outputs too).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ...kernels import accel
from ...kernels.portable import norm_accel
from .dataflow import Dataflow
from .patterns import Match, Pattern, Rule, Var, apply
from .steps import Step, StepPlan

EQ, NOT, ANY = "aten::eq.Scalar_out", "aten::logical_not.out", "aten::any.out"
FULL_LIKE, WHERE = "aten::full_like.out", "aten::where.self_out"
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _args(n: int):
    return lambda g, node: len(g.records[node].args) == n


_ROW_HIDDEN = Pattern(NOT, (Pattern(ANY, (Pattern(NOT, (Pattern(
    EQ, (Var("x"), Var("neg")), name="eq", test=_args(3)),), name="not1"),), name="any",
    test=_args(4)),), name="not2")
RULE = Rule("safe_softmax", Pattern(WHERE, (
    _ROW_HIDDEN, Pattern(FULL_LIKE, (Var("s"),), name="full", aliased=True), Var("s")),
    name="where", test=_args(4)), lambda g, m: _build(g, m))


def fuse_safe_softmax(flow: Dataflow, plan: StepPlan) -> None:
    """Replace each attention's six-instruction safe-softmax tail by one compiled pass."""
    if not accel.available():
        return
    nodes = [r.index for r in flow.records if r.name == WHERE and not plan.replaced(r.index)]
    for _, _, steps in apply(flow, [RULE], nodes):
        for index, new in steps.items():
            if new is not None:
                plan.replace(index, new)


def _build(flow: Dataflow, m: Match) -> dict[int, list[Step] | None] | None:
    """Instruction -> its steps (None: its own) for the six, or None."""
    eq, full, where = (flow.records[m[k]] for k in ("eq", "full", "where"))
    if m.nodes != tuple(range(eq.index, eq.index + 6)):
        return None  # the six consecutive, the comparison first
    x, s, out = m["x"], m["s"], where.outputs[0]
    if flow.values[m["neg"]] != -math.inf or flow.values[full.args[1]] != 0:
        return None
    xa, sa, oa = flow.array(x), flow.array(s), flow.array(out)
    if xa is None or sa is None or oa is None or not all(i in flow.fixed for i in (x, s, out)):
        return None
    if not (xa.dtype == sa.dtype == oa.dtype and xa.dtype in _FLOATS and
            xa.shape == sa.shape == oa.shape and xa.ndim >= 1 and xa.shape[-1] > 0 and
            all(a.flags.c_contiguous for a in (xa, sa, oa))):
        return None
    anyr = flow.records[m["any"]]
    if flow.values[anyr.args[1]] not in (-1, xa.ndim - 1) or flow.values[anyr.args[2]] is not True:
        return None
    # The zeros stay written where a value sharing their bytes may be read later (a
    # delegate's arguments count as read); they must not overwrite the result then.
    zeros = full.outputs[0]
    keep = flow.alias_read(zeros, full.index)
    span = flow.span(out)
    if span is None or keep and flow.touched([zeros], span):
        return None
    for v in (x, s):  # the result may take the very bytes of an input (one row at a time)
        if flow.span(v) != span and flow.touched([v], span):
            return None
    n = xa.shape[-1]
    step = partial(norm_accel.masked_rows_zero, xa.reshape(-1, n), sa.reshape(-1, n),
                   oa.reshape(-1, n))
    return {eq.index: [step], full.index: None if keep else [],
            **{i: [] for i in m.nodes if i not in (eq.index, full.index)}}
