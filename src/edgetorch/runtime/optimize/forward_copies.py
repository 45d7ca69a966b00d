"""Copies forwarded to the instruction that computes their source.

ExecuTorch's programs copy many results once more before reading them: an ``expand_copy`` to
the shape the tensor already has, a ``_clone_dim_order`` of a ``permute_copy``'s result, a
``clone``. When such a copy's source is read by that copy alone, the instruction computing
the source can write the copy's target directly (its preparer is simply asked for that output
instead of its own) and the copy has nothing left to do: one pass over the tensor and one step
less, with the same bits (a copy changes no value).

It applies when the graph allows: the source has one writer, a prepared kernel with one
output, the copy is a plain copy of the whole source (same shape, dtype and strides), the
source is no method output and no other value sharing its bytes is read later, and nothing
between the two instructions touches the target's bytes (the target is now written earlier
than the program wrote it), nor does the producer read them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...kernels.registry import Copy
from .dataflow import Dataflow
from .steps import StepPlan, prepare


def forward_copies(flow: Dataflow, plan: StepPlan) -> None:
    """Let the producer of a copy's source write the copy's target; drop the copy."""
    producer = dict(flow.producers)
    done: set[int] = set()  # copies forwarded: they write nothing any more
    for copy in flow.records:
        steps = plan.steps.get(copy.index)
        if copy.index not in plan.prepared or steps is None or len(steps) != 1:
            continue
        step = steps[0]
        if not (isinstance(step, Copy) and step.plain):
            continue
        src = next((i for i in copy.args if _whole(flow.values[i], step.source)), None)
        rec = producer.get(src) if src is not None else None
        if rec is None or rec.index not in plan.prepared or rec.index >= copy.index or \
                rec.index in done:
            continue
        if src not in flow.single_writer or flow.read_by(src) != [copy.index]:
            continue
        target = copy.outputs[0]
        if flow.touched([*rec.args, *flow.between(rec.index, copy.index)], flow.span(target)) \
                or flow.alias_read(src, rec.index):
            continue
        new = prepare(flow, plan, rec, out=step.target)
        if new is None:
            continue
        plan.replace(rec.index, new)
        plan.replace(copy.index, [])
        done.add(copy.index)
        producer[target] = rec  # a chain of copies forwards to its first producer


def _whole(a: Any, view: Any) -> bool:
    """``view`` is all of ``a``, element for element (the copy reads exactly that array)."""
    return (type(a) is np.ndarray and type(view) is np.ndarray and a.shape == view.shape
            and a.dtype == view.dtype and a.strides == view.strides
            and a.__array_interface__["data"][0] == view.__array_interface__["data"][0])
