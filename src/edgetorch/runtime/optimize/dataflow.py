"""What the load passes know about a method's values: the one place they learn it from.

A :class:`Dataflow` is made once per ``load_method`` from the loaded method (its values, their
memory, its instruction records) and answers the questions every pass asks, so none of them
reads ``Method``'s internals or re-derives the aliasing of planned memory by hand:

* which values are *fixed* (keep their bytes and sizes for the method's lifetime: constants
  of the program and static planned tensors) and which of those are *constants*;
* which values are written at run time, by how many instructions (``single_writer``), and who
  reads each one (``readers``; ``-1`` stands for the caller, when it is a method output);
* where each planned tensor's bytes lie (``span``), and whether a value that shares a result's
  bytes (a view the emitter left as a value of its own) is read before they are rewritten
  (``alias_read``), or whether a set of values touches some bytes at all (``touched``).

Nothing here changes while passes run: the passes replace instructions' steps, never the
values or the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from ...schema import program as S
from ..instructions import InstructionRecord, Kind
from ..values import BoxedList, TensorSlot

Span = tuple[int, int, int]  # (id of the buffer, first byte, end byte)


class Dataflow:
    """The values, writers, readers and memory of one loaded method (see the module doc)."""

    def __init__(self, method: str, values: Sequence[Any], slots: dict[int, TensorSlot],
                 bound: set[int], written: set[int], records: Sequence[InstructionRecord],
                 inputs: Iterable[int], outputs: Iterable[int], buffers: Iterable[int]) -> None:
        self.method = method
        self.values = values  # read only: each value as loaded (arrays, scalars, boxed lists)
        self.records = records
        self.outputs = tuple(outputs)
        self._slots, self._bound = slots, bound
        self._written = written
        self._inputs = frozenset(inputs)
        self._buffers = frozenset(buffers)  # mutable buffers: their value outlives a call

    # ---- values ---------------------------------------------------------------------------

    def array(self, i: int) -> np.ndarray | None:
        """Value ``i`` when it is a tensor (its array as loaded), else None."""
        v = self.values[i] if 0 <= i < len(self.values) else None
        return v if type(v) is np.ndarray else None

    def items(self, i: int) -> tuple[int, ...] | None:
        """The value indices of list value ``i`` (a TensorList...), else None."""
        v = self.values[i] if 0 <= i < len(self.values) else None
        return v.items if isinstance(v, BoxedList) else None

    def tensor_list(self, i: int) -> tuple[int, ...] | None:
        """The tensors of value ``i`` when it is a TensorList, else None."""
        v = self.values[i] if 0 <= i < len(self.values) else None
        return v.items if isinstance(v, BoxedList) and v.kind is S.TensorList else None

    def written(self, i: int) -> bool:
        """Whether anything writes value ``i`` at run time (an input, an instruction's out)."""
        return i in self._written

    @cached_property
    def fixed(self) -> frozenset[int]:
        """Tensor values whose array keeps its bytes and sizes for the method's lifetime."""
        out = set()
        static = S.TensorShapeDynamism.STATIC
        for i, v in enumerate(self.values):
            if type(v) is not np.ndarray:
                continue
            slot = self._slots.get(i)
            if slot is None:
                if i not in self._written:
                    out.add(i)  # a constant (a view of the program's data)
            elif slot.buffer is not None and i not in self._bound and slot.dynamism == static:
                out.add(i)
        return frozenset(out)

    def constant(self, i: int) -> bool:
        """A fixed value that is no planned tensor: the program's own data."""
        return i in self.fixed and i not in self._slots

    def planned(self, i: int) -> bool:
        """Value ``i`` has memory of the method's (planned, or its own until bound)."""
        return i in self._slots

    # ---- writers and readers -----------------------------------------------------------------

    @cached_property
    def single_writer(self) -> frozenset[int]:
        """Values written by exactly one instruction and by nothing else (not a method input,
        not a mutable buffer whose value outlives the call)."""
        count: dict[int, int] = {}
        for rec in self.records:
            for i in rec.outputs if rec.kind is not Kind.DELEGATE else rec.args:
                count[i] = count.get(i, 0) + 1
        skip = self._inputs | self._buffers
        return frozenset(i for i, c in count.items() if c == 1 and i not in skip)

    @cached_property
    def readers(self) -> dict[int, list[int]]:
        """Value -> the instructions that read it (not those that only write it), plus -1
        for the caller when it is a method output; a list's readers read its tensors too."""
        out: dict[int, list[int]] = {int(i): [-1] for i in self.outputs}
        for rec in self.records:
            for i in rec.args:
                if i in rec.outputs and rec.kind is Kind.KERNEL:
                    continue
                out.setdefault(i, []).append(rec.index)
                for j in self.items(i) or ():
                    out.setdefault(j, []).append(rec.index)
        return out

    def read_by(self, i: int) -> list[int]:
        return self.readers.get(i, [])

    @cached_property
    def producers(self) -> dict[int, InstructionRecord]:
        """Value -> the kernel instruction computing it, for one-output kernel calls."""
        return {rec.outputs[0]: rec for rec in self.records
                if rec.kind is Kind.KERNEL and len(rec.outputs) == 1}

    def unread(self, value: int, index: int) -> bool:
        """Nothing reads ``value`` once instruction ``index`` wrote it: no reader, not a method
        output, no value sharing its bytes read before they are rewritten."""
        return not self.readers.get(value) and not self.alias_read(value, index)

    # ---- as a graph for the fusion patterns (patterns.Graph): operations are instructions ----

    def op(self, node: int) -> str | None:
        rec = self.records[node]
        return rec.name if rec.kind is Kind.KERNEL else None

    def operands(self, node: int) -> tuple[int, ...]:
        return self.records[node].args

    def result(self, node: int) -> int | None:
        outs = self.records[node].outputs
        return outs[0] if outs else None

    def producer(self, value: int) -> int | None:
        rec = self.producers.get(value)
        return None if rec is None else rec.index

    def sole_reader(self, value: int) -> int | None:
        rs = self.readers.get(value)
        return rs[0] if rs and len(rs) == 1 and rs[0] >= 0 else None

    def inner(self, value: int, writer: int, nodes: frozenset[int], aliased: bool) -> bool:
        """An intermediate may vanish: one writer, read only inside the match (not by the
        caller), and (unless ``aliased``) not read through a value sharing its bytes."""
        rs = self.readers.get(value) or []
        return (value in self.single_writer and bool(rs) and all(r in nodes for r in rs)
                and (aliased or not self.alias_read(value, writer)))

    # ---- memory ------------------------------------------------------------------------------

    @cached_property
    def spans(self) -> dict[int, Span]:
        """Value -> (buffer, first byte, end byte) of every tensor with memory of its own."""
        out = {}
        for i, slot in self._slots.items():
            if slot.buffer is not None:
                out[i] = (id(slot.buffer), slot.offset,
                          slot.offset + slot.capacity * slot.dtype.itemsize)
        return out

    def span(self, i: int) -> Span | None:
        return self.spans.get(i)

    def planned_buffers(self) -> list[np.ndarray]:
        """The method's planned-memory arenas, each once (not the memory of unplanned values,
        which the runtime binds at run time)."""
        out: dict[int, np.ndarray] = {}
        for i, slot in self._slots.items():
            if slot.buffer is not None and i not in self._bound:
                out.setdefault(id(slot.buffer), slot.buffer)
        return list(out.values())

    @cached_property
    def _memory_steps(self) -> list[tuple[tuple[tuple[int, Span], ...], tuple[Span, ...]]]:
        """Per instruction: (value, span) of what it reads (not its own outs) and the spans it
        writes, each with memory of its own (``alias_read`` walks these, not the records)."""
        where = self.spans
        out = []
        for rec in self.records:
            kernel = rec.kind is Kind.KERNEL
            reads = tuple((i, where[i]) for i in rec.args
                          if i in where and not (kernel and i in rec.outputs))
            writes = tuple(where[i] for i in (rec.outputs if rec.kind is not Kind.DELEGATE
                                              else rec.args) if i in where)
            out.append((reads, writes))
        return out

    def alias_read(self, y: int, start: int) -> bool:
        """Whether another value sharing y's bytes is read after instruction ``start`` before
        anything writes those bytes: it would read y's value, which a pass that writes y
        elsewhere (or not at all) no longer puts there. Unknown bytes count as read."""
        ys = self.spans.get(y)
        if ys is None:
            return True
        buf, first, end = ys
        # bytes of y's buffer written since (only those can overlap a read of y's bytes)
        rewritten: list[Span] = []
        for reads, writes in self._memory_steps[start + 1:]:
            for i, s in reads:
                if i != y and s[0] == buf and s[1] < end and first < s[2] and \
                        not any(_overlap(s, w) for w in rewritten):
                    return True
            for s in writes:
                if s[0] == buf:
                    if s[1] <= first and end <= s[2]:
                        return False  # all of y's bytes rewritten: nothing later reads y
                    rewritten.append(s)
        return False

    def touched(self, values: Iterable[int], span: Span | None) -> bool:
        """Whether any of ``values`` (or the tensors of a list among them) has bytes in
        ``span`` (None: unknown, True)."""
        if span is None:
            return True
        where = self.spans
        for i in values:
            for j in (i, *(self.items(i) or ())):
                s = where.get(j)
                if s is not None and _overlap(s, span):
                    return True
        return False

    def between(self, first: int, last: int) -> list[int]:
        """The values the instructions strictly between ``first`` and ``last`` read or write."""
        return [i for r in self.records[first + 1:last] for i in (*r.args, *r.outputs)]


def _overlap(a: Span, b: Span) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]
