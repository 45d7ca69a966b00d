"""Memory planning algorithms: give each planned tensor an offset in its arena.

A tensor occupies ``[offset, offset + allocated_memory)`` during ``lifetime = [first, last]``
(instruction positions, inclusive). Two tensors may share bytes only when their lifetimes do
not overlap. ``naive`` is the baseline (no reuse); ``greedy`` places the largest tensors first,
each in the best-fitting gap among the tensors alive at the same time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .tensor import ALIGNMENT, TensorSpec, aligned

PlanningAlgo = Callable[[list[TensorSpec], int], int]


def _overlap(a: TensorSpec, b: TensorSpec) -> bool:
    return a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]


def naive(specs: list[TensorSpec], alignment: int = ALIGNMENT) -> int:
    """Every tensor gets its own bytes, one after another. Returns the arena size."""
    offset = 0
    for spec in specs:
        spec.mem_offset = offset
        offset += aligned(spec.allocated_memory, alignment)
    return offset


def greedy(specs: list[TensorSpec], alignment: int = ALIGNMENT) -> int:
    """The smaller of two greedy placements (by-offset best fit, shared objects); each is a
    heuristic and neither wins on every graph. Returns the arena size."""
    by_offset = _best_fit_offsets(specs, alignment)
    offsets = [s.mem_offset for s in specs]
    by_object = _shared_objects(specs, alignment)
    if by_offset <= by_object:
        for spec, off in zip(specs, offsets):
            spec.mem_offset = off
        return by_offset
    return by_object


def _shared_objects(specs: list[TensorSpec], alignment: int) -> int:
    """Largest first, each tensor joins the best-sized buffer none of whose tensors is alive
    at the same time (or opens a new one); buffers are then laid out one after another."""
    objects: list[list[TensorSpec]] = []
    sizes: list[int] = []
    for spec in sorted(specs, key=lambda s: (-s.allocated_memory, s.lifetime[0])):
        size = aligned(spec.allocated_memory, alignment)
        free = [i for i, members in enumerate(objects)
                if not any(_overlap(m, spec) for m in members)]
        fits = [i for i in free if sizes[i] >= size]
        pick = min(fits, key=lambda i: sizes[i]) if fits else (
            max(free, key=lambda i: sizes[i]) if free else None)
        if pick is None:
            objects.append([spec])
            sizes.append(size)
        else:
            objects[pick].append(spec)
            sizes[pick] = max(sizes[pick], size)
    offset = 0
    for members, size in zip(objects, sizes):
        for spec in members:
            spec.mem_offset = offset
        offset += size
    return offset


def _best_fit_offsets(specs: list[TensorSpec], alignment: int) -> int:
    """Largest first; each tensor takes the smallest gap that fits among the tensors whose
    lifetimes overlap its own (or goes on top)."""
    order = sorted(specs, key=lambda s: (-s.allocated_memory, s.lifetime[0]))
    placed: list[TensorSpec] = []
    top = 0
    for spec in order:
        size = aligned(spec.allocated_memory, alignment)
        busy = sorted(
            ((p.mem_offset, p.mem_offset + aligned(p.allocated_memory, alignment))
             for p in placed if _overlap(p, spec)),
        )
        best, best_gap, cursor = None, None, 0
        for start, end in busy:
            gap = start - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, end)
        spec.mem_offset = best if best is not None else cursor
        placed.append(spec)
        top = max(top, spec.mem_offset + size)
    return top


ALGORITHMS: dict[str, PlanningAlgo] = {"naive": naive, "greedy": greedy}


@dataclass
class MemoryPlan:
    """The outcome of planning one method: arena sizes by memory id and the planned specs."""

    buffer_sizes: list[int]  # index 0 is reserved (ExecuTorch's convention), arenas from 1
    specs: list[TensorSpec] = field(default_factory=list)
    algorithm: str = "greedy"

    @property
    def total(self) -> int:
        return sum(self.buffer_sizes)

    def __str__(self) -> str:
        lines = [f"MemoryPlan({self.algorithm}): arenas {self.buffer_sizes[1:]} bytes"]
        for spec in sorted(self.specs, key=lambda s: (s.mem_id, s.mem_offset)):
            lines.append(
                f"  mem{spec.mem_id} [{spec.mem_offset:>8}, {spec.mem_offset + spec.allocated_memory:>8})"
                f" life {spec.lifetime[0]:>4}..{spec.lifetime[1]:<4} {spec}"
            )
        return "\n".join(lines)


def plan(specs: list[TensorSpec], algorithm: str | PlanningAlgo = "greedy",
         alignment: int = ALIGNMENT) -> MemoryPlan:
    """Plan ``specs`` arena by arena (``spec.mem_id``, default 1)."""
    algo = ALGORITHMS[algorithm] if isinstance(algorithm, str) else algorithm
    by_id: dict[int, list[TensorSpec]] = {}
    for spec in specs:
        if spec.mem_id is None:
            spec.mem_id = 1
        by_id.setdefault(spec.mem_id, []).append(spec)
    sizes = [0] * (max(by_id, default=0) + 1)
    for mem_id, group in by_id.items():
        sizes[mem_id] = algo(group, alignment)
    name = algorithm if isinstance(algorithm, str) else getattr(algorithm, "__name__", "custom")
    return MemoryPlan(sizes, list(specs), name)
