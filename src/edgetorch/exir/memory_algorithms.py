"""Memory planning algorithms with ExecuTorch's call shape (re-exported by ``memory_planning``).

An algorithm is ``algo(alignment, specs, graph_module, graph_signature, extra_padding) ->
MemoryAlgoResult``: it decides ``(mem_id, mem_obj_id, mem_offset)`` for every spec without
writing them; :class:`MemoryPlanningAlgorithmSuite` runs a list of algorithms, keeps the one
with the smallest total and writes its decisions onto the specs. Plans equal ExecuTorch
1.5.1's for the same specs in the same order, which is what makes our ``.pte`` files
byte-identical to its own:

* ``greedy`` -- ExecuTorch's "shared objects": specs largest first (a stable sort, then
  reversed, so equal sizes go in reverse collection order); each joins the first object none
  of whose tensors is alive at the same time (at offset 0), else the first object with room
  above the tensors it overlaps, else opens a new object of its own size. Objects are laid
  out one after another per ``mem_id``, after the space control-flow submodules set aside.
* ``naive`` -- every spec gets its own bytes, in collection order.

A spec with ``storage_base`` lives inside its base's bytes (``storage_base_offset``).
"""

from __future__ import annotations

import bisect
import functools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import MemoryPlanningError
from .tensor import TensorSpec


@dataclass
class AllocationSpec:
    """A spec placed ``offset`` bytes into a shared object."""

    offset: int
    spec: TensorSpec


@dataclass
class SharedObject:
    """A run of bytes several tensors take turns in (those never alive at the same time)."""

    idx: int
    offset: int
    size: int
    first_used_index: int
    last_used_index: int
    allocations: list[AllocationSpec] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"SharedObject(idx={self.idx}, offset={self.offset}, size={self.size}, "
                f"lifetime=[{self.first_used_index}, {self.last_used_index}])")


@dataclass
class SpecAllocResult:
    """What an algorithm decided for one spec (written back only if it wins the suite)."""

    mem_id: int
    mem_obj_id: int
    mem_offset: int


@dataclass(eq=False)
class MemoryAlgoResult:
    """An algorithm's decisions for every spec and the arena sizes they need."""

    spec_dict: dict[TensorSpec, SpecAllocResult]
    bufsizes: list[int]


def _disjoint(a: TensorSpec, b: TensorSpec) -> bool:
    return a.lifetime[1] < b.lifetime[0] or a.lifetime[0] > b.lifetime[1]


def _free_of(sobj: SharedObject, spec: TensorSpec) -> bool:
    return all(_disjoint(spec, alloc.spec) for alloc in sobj.allocations)


def _top_of_overlapping(sobj: SharedObject, spec: TensorSpec) -> int:
    """The end of the highest allocation in ``sobj`` alive together with ``spec`` (0: none)."""
    return max((a.offset + a.spec.allocated_memory for a in sobj.allocations
                if not _disjoint(spec, a.spec)), default=0)


def _join(sobj: SharedObject, spec: TensorSpec, offset: int) -> SharedObject:
    sobj.first_used_index = min(sobj.first_used_index, spec.lifetime[0])
    sobj.last_used_index = max(sobj.last_used_index, spec.lifetime[1])
    sobj.allocations.append(AllocationSpec(offset, spec))
    return sobj


def pick_shared_obj(shared_objects: list[SharedObject], spec: TensorSpec,
                    allow_overlapping_allocations: bool = True) -> SharedObject:
    """Place ``spec`` (specs come largest first) in an existing object or a new one."""
    for sobj in shared_objects:
        if _free_of(sobj, spec):
            if sobj.size < spec.allocated_memory:
                raise MemoryPlanningError("greedy memory planning: specs are not sorted by size")
            return _join(sobj, spec, 0)
    if allow_overlapping_allocations:
        for sobj in shared_objects:
            top = _top_of_overlapping(sobj, spec)
            if top > 0 and top + spec.allocated_memory <= sobj.size:
                return _join(sobj, spec, top)
    sobj = SharedObject(len(shared_objects), -1, spec.allocated_memory,
                        spec.lifetime[0], spec.lifetime[1])
    sobj.allocations.append(AllocationSpec(0, spec))
    shared_objects.append(sobj)
    return sobj


def _place_in_bases(deferred: list[TensorSpec], spec2obj: dict[TensorSpec, SharedObject],
                    result: MemoryAlgoResult) -> None:
    """Specs with a ``storage_base`` go inside their base's allocation (bases may chain)."""
    remaining = list(deferred)
    while remaining:
        waiting = []
        for spec in remaining:
            base = spec.storage_base
            if base not in spec2obj:
                waiting.append(spec)
                continue
            sobj = spec2obj[base]
            result.spec_dict[spec].mem_id = result.spec_dict[base].mem_id
            base_alloc = next(a for a in sobj.allocations if a.spec is base)
            offset = base_alloc.offset + spec.storage_base_offset
            if spec.storage_base_offset < 0 or offset % spec.alignment:
                raise MemoryPlanningError(
                    f"storage_base_offset {spec.storage_base_offset} breaks the alignment "
                    f"{spec.alignment} of a storage-backed spec; use a multiple of it")
            if spec.storage_base_offset + spec.allocated_memory > base.allocated_memory:
                raise MemoryPlanningError("a storage-backed spec must fit inside its "
                                          "storage_base; check storage_base_offset")
            spec2obj[spec] = _join(sobj, spec, offset)
        if len(waiting) == len(remaining):
            raise MemoryPlanningError(
                "circular or unresolvable storage_base chain of specs of "
                + ", ".join(f"{s.allocated_memory} bytes" for s in waiting)
                + "; every storage_base must be planned too")
        remaining = waiting


def _lay_out(shared_objects: dict[int, list[SharedObject]], graph_module: Any,
             extra_padding: int, result: MemoryAlgoResult, expected: int) -> list[int]:
    if not shared_objects:
        return [0, 0]
    reserved = getattr(graph_module, "input_mem_buffer_sizes", None) or []
    sizes = [0] * (max(shared_objects) + 1)
    placed = 0
    for mem_id, objects in shared_objects.items():
        total = reserved[mem_id] if len(reserved) > mem_id else 0
        for sobj in objects:
            sobj.offset = total
            total += sobj.size
        sizes[mem_id] = total + extra_padding
        for sobj in objects:
            for alloc in sobj.allocations:
                decided = result.spec_dict[alloc.spec]
                decided.mem_obj_id = sobj.idx
                decided.mem_offset = sobj.offset + alloc.offset
                placed += 1
    if placed != expected:
        raise MemoryPlanningError(f"greedy memory planning placed {placed} specs of {expected}")
    return sizes


def greedy(alignment: int, specs: Iterable[TensorSpec], graph_module: Any,
           graph_signature: Any, extra_padding: int = 0, *,
           allow_overlapping_allocations: bool = True) -> MemoryAlgoResult:
    """ExecuTorch's greedy shared-object algorithm (see the module docstring)."""
    result = MemoryAlgoResult({}, [])
    by_size: list[TensorSpec] = []
    for spec in specs:  # stable: equal sizes keep their order ...
        bisect.insort(by_size, spec, key=lambda s: s.allocated_memory)
    by_size.reverse()  # ... which the reversal turns around
    spec2obj: dict[TensorSpec, SharedObject] = {}
    objects: dict[int, list[SharedObject]] = defaultdict(list)
    deferred: list[TensorSpec] = []
    for spec in by_size:
        decided = result.spec_dict.setdefault(spec, SpecAllocResult(0, 0, 0))
        decided.mem_id = 1 if spec.mem_id is None else spec.mem_id
        spec.realign(alignment)
        if spec.storage_base is not None:
            deferred.append(spec)
            continue
        spec2obj[spec] = pick_shared_obj(objects[decided.mem_id], spec,
                                         allow_overlapping_allocations)
    _place_in_bases(deferred, spec2obj, result)
    result.bufsizes = _lay_out(objects, graph_module, extra_padding, result, len(spec2obj))
    return result


def naive(alignment: int, specs: Iterable[TensorSpec], graph_module: Any,
          graph_signature: Any, extra_padding: int = 0) -> MemoryAlgoResult:
    """No reuse: each spec gets its own bytes after the previous one of its ``mem_id``
    (ExecuTorch's naive adds no ``extra_padding``)."""
    result = MemoryAlgoResult({}, [])
    sizes = getattr(graph_module, "input_mem_buffer_sizes", None)
    sizes = [0, 0] if sizes is None else sizes
    for spec in specs:
        if spec.storage_base is not None:
            raise MemoryPlanningError("the naive memory planning algorithm cannot place storage-backed "
                                "TensorSpecs; use greedy")
        decided = result.spec_dict.setdefault(spec, SpecAllocResult(0, 0, 0))
        decided.mem_id = 1 if spec.mem_id is None else spec.mem_id
        spec.realign(alignment)
        if decided.mem_id >= len(sizes):
            sizes.extend([0] * (decided.mem_id - len(sizes) + 1))
        decided.mem_offset = sizes[decided.mem_id]
        sizes[decided.mem_id] += spec.allocated_memory
    result.bufsizes = sizes
    return result


def algo_name(algo: Callable[..., Any]) -> str:
    if isinstance(algo, functools.partial):
        return algo.func.__name__
    return getattr(algo, "__name__", None) or repr(algo)


class MemoryPlanningAlgorithmSuite:
    """Runs every algorithm of ``algo_list`` (default ``[greedy]``) and keeps the plan with the
    smallest total; returns its arena sizes (index 0 is the constant segment's, always 0)."""

    def __init__(self, algo_list: list[Callable[..., MemoryAlgoResult]] | None = None) -> None:
        self.algo_list = [greedy] if algo_list is None else algo_list

    def __call__(self, alignment: int, specs: Iterable[TensorSpec],
                 graph_module: torch.fx.GraphModule, graph_signature: Any,
                 extra_padding: int) -> list[int]:
        specs = list(specs)
        results: dict[str, MemoryAlgoResult] = {}
        for algo in self.algo_list:
            results[algo_name(algo)] = algo(alignment, specs, graph_module, graph_signature,
                                            extra_padding)
        if len({len(r.bufsizes) for r in results.values()}) != 1:
            raise MemoryPlanningError("memory planning algorithms disagree on the number of arenas")
        best = results[min(results, key=lambda k: sum(results[k].bufsizes))]
        for spec, decided in best.spec_dict.items():
            spec.mem_id = decided.mem_id
            spec.mem_offset = decided.mem_offset
            spec.mem_obj_id = decided.mem_obj_id
        return best.bufsizes


ALGORITHMS: dict[str, Callable[..., MemoryAlgoResult]] = {"naive": naive, "greedy": greedy}


@dataclass
class MemoryPlan:
    """The outcome of planning one method (``ExecutorchProgramManager.memory_plan``): arena
    sizes by memory id and the planned specs."""

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
