"""Copies forwarded to the instruction that computes their source, at ``load_method``.

ExecuTorch's programs copy many results once more before reading them: an ``expand_copy`` to
the shape the tensor already has, a ``_clone_dim_order`` of a ``permute_copy``'s result, a
``clone``. When such a copy's source is read by that copy alone, the instruction computing
the source can write the copy's target directly (its preparer is simply asked for that
output instead of its own) and the copy has nothing left to do: one pass over the tensor and
one step less, with the same bits (a copy changes no value).

It applies when the graph allows: the source has one writer, a prepared kernel with one
output, the copy is a plain copy of the whole source (same shape, dtype and strides), the
source is no method output and no other value sharing its bytes is read later, and nothing
between the two instructions touches the target's bytes (the target is now written earlier
than the program wrote it), nor does the producer read them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from . import fold_bn

if TYPE_CHECKING:
    from .method import Method

Prepare = Callable[[Any, np.ndarray], "list[Callable[[], Any]] | None"]


def forward(m: Method, per: dict[int, list[Callable[[], Any]]], prepared: set[int],
            once: set[int], prepare: Prepare, facts: fold_bn.Facts) -> None:
    """Rewrite ``per`` (instruction -> steps) in place for each forwardable copy."""
    reads, where = facts.reads, facts.where
    producer = {rec.outputs[0]: rec for rec in m.records
                if rec.kind == "kernel" and len(rec.outputs) == 1}
    done: set[int] = set()  # copies forwarded: they write nothing any more
    for copy in m.records:
        if copy.index not in prepared or len(per[copy.index]) != 1:
            continue
        step = per[copy.index][0]
        if not (isinstance(step, partial) and step.func is np.copyto and not step.keywords
                and len(step.args) == 2):
            continue
        target, view = step.args
        src = next((i for i in copy.args if _whole(m._vals[i], view)), None)
        rec = producer.get(src) if src is not None else None
        if rec is None or rec.index not in prepared or rec.index >= copy.index or \
                rec.index in done:
            continue
        if src not in once or reads.get(src) != [copy.index]:
            continue
        if not _target_free(m, rec, copy, copy.outputs[0], where) or \
                fold_bn.alias_read(m, src, rec.index, where):
            continue
        steps = prepare(rec, target)
        if steps is None:
            continue
        per[rec.index] = list(steps)
        per[copy.index] = []
        done.add(copy.index)
        producer[copy.outputs[0]] = rec  # a chain of copies forwards to its first producer


def _whole(a: Any, view: Any) -> bool:
    """``view`` is all of ``a``, element for element (the copy reads exactly that array)."""
    return (type(a) is np.ndarray and type(view) is np.ndarray and a.shape == view.shape
            and a.dtype == view.dtype and a.strides == view.strides
            and a.__array_interface__["data"][0] == view.__array_interface__["data"][0])


def _target_free(m: Method, rec, copy, t: int,
                 where: dict[int, tuple[int, int, int]]) -> bool:
    """No instruction from the producer (its inputs) up to the copy reads or writes the
    target's bytes, so writing the target at the producer's place changes nothing else."""
    between = fold_bn.io(m.records[rec.index + 1:copy.index])
    return not fold_bn.touched(m, [*rec.args, *between], where.get(t), where)
