"""Prepared kernels: an instruction whose tensors all keep their memory and sizes from call to
call (fixed values) runs its kernel's preparer's steps (``kernels.registry.prepares``): a few
NumPy calls bound to those arrays, with no dtype promotion, shape checks or view building left
for ``execute``, computing the kernel's very bits (each preparer is tested against its kernel).

A preparer registered with ``prepares(..., unread_outputs=True)`` may also be given None for an
out argument nothing reads (``max_pool2d_with_indices``' indices in a CNN) and skip computing it.
"""

from __future__ import annotations

from ...kernels.registry import get_kernel
from ..instructions import Kind
from .dataflow import Dataflow
from .steps import StepPlan, prepare


def prepare_kernels(flow: Dataflow, plan: StepPlan) -> None:
    """Run each instruction on fixed tensors by its kernel's preparer's steps."""
    for rec in flow.records:
        if rec.kind is not Kind.KERNEL or plan.replaced(rec.index):
            continue
        steps = prepare(flow, plan, rec)
        if steps is not None:
            plan.replace(rec.index, steps)
            plan.prepared.add(rec.index)
            plan.reads_folded.add(rec.index)


def skip_unread_outputs(flow: Dataflow, plan: StepPlan) -> None:
    """Prepare with None for the outputs nothing reads the kernels that can skip them."""
    for rec in flow.records:
        index = rec.index
        if rec.kind is not Kind.KERNEL or (plan.replaced(index) and index not in plan.prepared) or \
                not get_kernel(rec.name).prepare_unread:
            continue
        unread = frozenset(j for j in flow.tensor_list(rec.call[-1]) or ()
                           if flow.unread(j, index))
        steps = prepare(flow, plan, rec, unread=unread) if unread else None
        if steps is not None:
            plan.replace(index, steps)
            plan.prepared.add(index)
            plan.reads_folded.add(index)
