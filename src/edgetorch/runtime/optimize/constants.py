"""Constant folding, and dropping the copies of folded results nothing reads.

An instruction whose inputs are all constants (or results of folded instructions) computes the
same thing on every call, so its kernel runs here, once, and ``execute`` only copies the result
into its planned memory (planned memory is shared over time, and other values may alias those
bytes: the copy goes where the instruction was, always). A large copy of a view of constants
(ExecuTorch's ``permute_copy`` of a classifier's weight, 5 MB in MobileNetV2) is folded as the
view itself, no memory taken: its readers' preparers get the view (a matrix product then reads
the transposed weight in place, as torch's ``linear`` does, which may round differently from
the product of the copy).

Once the readers are prepared, a copy of a folded result that no step reads any more (every
reader was prepared with the folded array itself, the value is no method output, and no value
sharing its bytes is read before they are rewritten) is dropped.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import EdgeTorchError
from ...kernels.registry import Copy, get_kernel
from ..instructions import InstructionRecord, Kind, call_kernel
from .dataflow import Dataflow
from .steps import Step, StepPlan, arguments, prepare, single_out

MAX_FOLD_BYTES = 1 << 22  # a folded result is kept beside its planned memory: small ones only

# Kernels whose result is not a function of their arguments: never folded.
_NOT_PURE = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "poisson",
             "exponential", "geometric", "cauchy", "empty", "et_copy_index", "_local_scalar")
_IMPURE = re.compile("|".join(map(re.escape, _NOT_PURE)))


def fold_constants(flow: Dataflow, plan: StepPlan) -> None:
    """Run instructions whose inputs are all known at load; keep their results."""
    for rec in flow.records:
        if rec.kind is not Kind.KERNEL or plan.replaced(rec.index):
            continue
        out = single_out(rec)
        if out is None:
            continue
        steps = _fold(flow, plan, rec, out)
        if steps is not None:
            plan.replace(rec.index, steps)
            plan.copies[out] = (rec.index, steps[0])
            plan.reads_folded.add(rec.index)


def _fold(flow: Dataflow, plan: StepPlan, rec: InstructionRecord, out: int) -> list[Step] | None:
    if out not in flow.single_writer or out not in flow.fixed or _IMPURE.search(rec.name):
        return None
    for i in rec.args[:-1]:  # every input tensor a constant or a folded result
        items = flow.items(i) or ((i,) if flow.array(i) is not None else ())
        if any(flow.planned(j) and j not in plan.folded for j in items):
            return None
    target = flow.array(out)
    assert target is not None  # (fixed values are arrays)
    if target.nbytes > MAX_FOLD_BYTES:
        return _fold_view(flow, plan, rec, out, target)
    args = arguments(flow, rec, plan)
    if args is None:
        return None
    own = np.empty_like(target)  # same sizes, dtype and layout as the planned tensor
    try:
        res = call_kernel(get_kernel(rec.name).fn, *args[:-1], own)
    except EdgeTorchError:  # the kernel refuses these inputs: it fails at run time, in context
        return None
    if res is not own:
        if type(res) is not np.ndarray or res.shape != own.shape:
            return None
        np.copyto(own, res, casting="unsafe")
    own.flags.writeable = False
    plan.folded[out] = own
    return [Copy(target, own)]


def _fold_view(flow: Dataflow, plan: StepPlan, rec: InstructionRecord, out: int,
               target: np.ndarray) -> list[Step] | None:
    """The copy's preparer says which view of the constants it copies; that view is the
    folded value, and the copy into planned memory stays only for readers of that memory."""
    steps = prepare(flow, plan, rec)
    if not steps or len(steps) != 1:
        return None
    step = steps[0]
    if not (isinstance(step, Copy) and step.plain and step.target is target):
        return None
    view = step.source
    if type(view) is not np.ndarray or view.dtype != target.dtype or view.shape != target.shape:
        return None
    view = view.view()
    view.flags.writeable = False
    plan.folded[out] = view
    return steps


def drop_unread_copies(flow: Dataflow, plan: StepPlan) -> None:
    """Drop the copies of folded results into planned memory that no step reads."""
    for v, (index, step) in plan.copies.items():
        if all(r in plan.reads_folded for r in flow.read_by(v)) and \
                not flow.alias_read(v, index):
            plan.replace(index, [s for s in plan.steps[index] if s is not step])
