"""Planned memory written once at load, so the first ``execute`` does not fault it in.

A method's arenas come from ``np.zeros``: the operating system maps their pages on the first
write, which would otherwise be the first call's (a page fault and a page of zeros per 4 KB:
milliseconds for a few MB, the difference between a first call and a later one in a small
model). Writing one byte of each page, with its own value, maps them here instead and changes
no value (a mutable buffer's initial state is already in place).
"""

from __future__ import annotations

import mmap

import numpy as np

from .dataflow import Dataflow
from .steps import StepPlan

# Beyond this much planned memory a method's first calls map only the pages they use (an LLM's
# caches sized for its longest context): touching them all would grow the process by memory
# it may never use, and the load by ~0.3 ms per MB.
MAX_TOUCH_BYTES = 64 << 20


def touch_planned_memory(flow: Dataflow, plan: StepPlan) -> None:
    """Write each page of the planned memory once at load (first-touch out of execute)."""
    arenas = flow.planned_buffers()
    if sum(a.nbytes for a in arenas) > MAX_TOUCH_BYTES:
        return
    for arena in arenas:
        if arena.size and arena.flags.writeable:
            flat = arena.reshape(-1)
            pages = flat[::mmap.PAGESIZE]
            np.bitwise_or(pages, 0, out=pages)  # (each page written, its bytes unchanged)
            flat[-1:] |= 0  # the last page, when the arena starts mid-page
