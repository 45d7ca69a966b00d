"""The plain loop's steps while the load passes work on them, and the preparer call they share.

:class:`StepPlan` starts with every instruction running its own closure (the record's
``run``, which calls the kernel with the values of the moment: the reference) and records what
each pass replaces: an instruction's steps (``[]``: nothing left to do), the values computed at
load (``folded``), which instructions run their preparer's steps (``prepared``) and which read
folded arrays in place (``reads_folded``). :meth:`StepPlan.flat` lays the result out for
``instructions.run_steps``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import EdgeTorchError
from ...kernels.registry import get_kernel
from ..instructions import InstructionRecord, Kind, call_kernel
from .dataflow import Dataflow

Step = Callable[[], Any]


class StepPlan:
    """Instruction -> the steps that replace its closure, and what the passes learnt."""

    def __init__(self, flow: Dataflow, options: Any = None) -> None:
        self.flow = flow
        self.options = options  # pipeline.Options of this load (for steps built later)
        self.current: Any = None  # the pass running (pipeline.Pass)
        self.steps: dict[int, list[Step]] = {}  # absent: the record's own closure
        self.folded: dict[int, np.ndarray] = {}  # value -> its load-time result
        self.copies: dict[int, tuple[int, Step]] = {}  # folded value -> (instruction, copy step)
        self.prepared: set[int] = set()  # instructions run by their preparer's steps
        self.reads_folded: set[int] = set()  # instructions whose steps read folded arrays

    def replaced(self, index: int) -> bool:
        return index in self.steps

    def replace(self, index: int, steps: list[Step]) -> None:
        self.steps[index] = steps

    def build(self, build: Callable[[], Step | None]) -> Step | None:
        """``build()``, under the running pass's guard of this one build: a step, or None
        when it refuses the values or fails (reported; the instructions keep their steps).
        At load, not on a first call: ``execute`` only runs what is built."""
        if self.options is None:
            return build()
        return self.options.guard(self.current, build)

    def snapshot(self) -> tuple[Any, ...]:
        return (dict(self.steps), dict(self.folded), dict(self.copies), set(self.prepared),
                set(self.reads_folded))

    def restore(self, snap: tuple[Any, ...]) -> None:
        """Undo a pass that failed half way (its partial replacements must not run)."""
        (self.steps, self.folded, self.copies, self.prepared, self.reads_folded) = (
            dict(snap[0]), dict(snap[1]), dict(snap[2]), set(snap[3]), set(snap[4]))

    def changed_since(self, snap: tuple[Any, ...]) -> int:
        before = snap[0]
        return sum(1 for k, v in self.steps.items() if before.get(k) is not v)

    def flat(self) -> tuple[list[Step], list[int]]:
        """(steps, the instruction each belongs to), in instruction order; a ``free`` (planned
        memory: nothing to release) has none."""
        steps: list[Step] = []
        owner: list[int] = []
        for rec in self.flow.records:
            new = self.steps.get(rec.index)
            if new is None:
                new = [] if rec.kind is Kind.FREE else [rec.run]
            steps += new
            owner += [rec.index] * len(new)
        return steps, owner


def single_out(rec: InstructionRecord) -> int | None:
    """The out value of a one-output kernel call (its last argument, also its return slot)."""
    call = rec.call
    if rec.in_place or len(call) < 2 or call[-1] != call[-2] or rec.outputs != (call[-1],):
        return None
    return call[-1]


def arguments(flow: Dataflow, rec: InstructionRecord, plan: StepPlan) -> list[Any] | None:
    """The kernel's arguments as arrays and Python values fixed at load (a value folded by an
    earlier instruction as its load-time result), or None when one changes from call to call."""
    args: list[Any] = []
    fixed = flow.fixed

    def folded(i: int) -> np.ndarray | None:
        a = plan.folded.get(i)
        return a if a is not None and plan.copies[i][0] < rec.index else None

    for i in rec.args:
        a = folded(i)
        if a is not None:
            args.append(a)
            continue
        v = flow.values[i]
        if type(v) is np.ndarray:
            if i not in fixed:
                return None
            args.append(v)
            continue
        items = flow.tensor_list(i)
        if items is not None:
            if flow.written(i) or not all(j in fixed for j in items):
                return None
            args.append([flow.values[j] if folded(j) is None else folded(j) for j in items])
        elif flow.items(i) is not None or flow.written(i):
            return None
        else:
            args.append(v)
    return args


def prepare(flow: Dataflow, plan: StepPlan, rec: InstructionRecord,
            out: np.ndarray | None = None, unread: frozenset[int] = frozenset()
            ) -> list[Step] | None:
    """The preparer's steps for ``rec`` (``kernels.registry.prepares``), or None when its
    kernel has none or refuses these arguments. ``out``: another array to write than its own
    out (the target of a copy forwarded to it); ``unread``: out values to pass as None, for a
    preparer that skips them (``prepares(unread_outputs=True)``)."""
    entry = get_kernel(rec.name)
    if entry.prepare is None or rec.in_place:
        return None
    call = rec.call
    outs = flow.tensor_list(call[-1])
    fixed = flow.fixed
    if outs is not None:  # several outputs: they must be the trailing out arguments
        if call[-1 - len(outs):-1] != outs or not all(j in fixed for j in outs):
            return None
    elif flow.items(call[-1]) is not None or call[-1] not in fixed or single_out(rec) is None:
        return None
    args = arguments(flow, rec, plan)
    if args is None or len(args) != entry.num_args:
        return None
    if out is not None:
        args[-1] = out
    if unread and outs is not None and entry.prepare_unread:
        for k, j in enumerate(outs):
            if j in unread:
                args[len(args) - len(outs) + k] = None
    try:
        steps = call_kernel(entry.prepare, *args)
    except EdgeTorchError as e:
        # The kernel refuses these arguments too (a file's malformed ones: a list where a
        # tensor goes, ...): it fails at run time, in context. If the kernel takes them, the
        # preparer's own failure is its bug, for the pass's guard.
        cause = e.__cause__
        if cause is None or isinstance(cause, EdgeTorchError) or \
                _kernel_refuses(entry.fn, args, len(outs) if outs is not None else 1):
            return None
        raise cause from None
    return None if steps is None else list(steps)


def _kernel_refuses(fn: Callable[..., Any], args: list[Any], n_out: int) -> bool:
    """Whether the kernel itself fails on ``args`` (its outs replaced by scratch arrays), or
    returns a result its one fixed out cannot take (``execute`` refuses that too)."""
    trial = [a.copy() if isinstance(a, np.ndarray) and k >= len(args) - n_out else a
             for k, a in enumerate(args)]
    try:
        res = call_kernel(fn, *trial)
    except EdgeTorchError:
        return True
    out = trial[-1]
    return n_out == 1 and isinstance(out, np.ndarray) and res is not out and \
        not (type(res) is np.ndarray and res.shape == out.shape)
