"""The plain ``execute`` loop's steps, worked out at ``load_method``.

Every instruction already has a pre-bound closure (``InstructionRecord.run``) that calls its
kernel with the values of the moment. For the plain (untraced) loop this module goes further,
once per method:

* **prepared kernels**: when every tensor an instruction touches keeps its memory and sizes
  from call to call (constants, static planned tensors: *fixed* values), the kernel's preparer
  (``kernels.registry.prepares``) turns the call into a few NumPy calls bound to those arrays,
  with no dtype promotion, shape checks or view building left for ``execute``;
* **BatchNorm folding**: a convolution followed by an inference BatchNorm becomes one
  convolution with folded weights (``fold_bn.py``);
* **safe softmax**: the six instructions after an attention's softmax that zero fully masked
  rows become one compiled pass (``safe_softmax.py``);
* **unread outputs**: a preparer registered with ``prepares(..., unread_outputs=True)`` gets
  None for an out argument nothing reads (``max_pool2d_with_indices``' indices in a CNN) and
  skips computing it;
* **constant folding**: an instruction whose inputs are all constants (or results of folded
  instructions) computes the same thing on every call, so its kernel runs here, once, and
  ``execute`` only copies the result into its planned memory, and not even that when every
  reader was prepared with the folded array itself. A large copy of a view of constants
  (a transposed weight) is folded as the view: no memory, and its readers read it in place.

The traced loop keeps the closures (one event per instruction, the kernels themselves); both
give the same bits (but for BatchNorm folding and products read from a folded view, equal within
float rounding), which the tests check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..kernels.registry import get_kernel
from ..schema import program as S
from . import fold_bn, forward_copies, safe_softmax
from .values import BoxedList

if TYPE_CHECKING:
    from .method import Method

ENABLED = True  # tests switch it off to compare with the closures
MAX_FOLD_BYTES = 1 << 22  # a folded result is kept beside its planned memory: small ones only

# Kernels whose result is not a function of their arguments: never folded.
_NOT_PURE = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "poisson",
             "exponential", "geometric", "cauchy", "empty", "et_copy_index", "_local_scalar")
_IMPURE = re.compile("|".join(map(re.escape, _NOT_PURE)))


def plan_steps(m: Method, written: set[int]) -> tuple[list[Callable[[], Any]], list[int]] | None:
    """(steps, the instruction each step belongs to) for the plain loop, or None to run the
    records' closures (control flow, or the fast path switched off)."""
    if not ENABLED or m._has_jumps:
        return None
    fixed = _fixed(m, written)
    facts = fold_bn.Facts(m)  # who reads what, where each value lives: listed once
    unread = _Unread(m, facts)
    folded: dict[int, np.ndarray] = {}  # value -> its load-time result (folded instructions)
    once = _single_writer(m)
    steps: list[Callable[[], Any]] = []
    owner: list[int] = []
    try:
        pairs = fold_bn.fold(m, fixed, written, facts)  # convolution + BatchNorm: one step
    except Exception:  # noqa: BLE001 - an optimisation never fails a load
        pairs = {}
    try:  # an attention's "safe softmax" tail: six instructions, one step
        pairs.update(safe_softmax.fuse(m, fixed, once, facts))
    except Exception:  # noqa: BLE001 - an optimisation never fails a load
        pass
    substituted: set[int] = set()  # instructions whose steps read folded results directly
    prepared: set[int] = set()  # instructions run by their preparer's steps
    copies: dict[int, tuple[int, Callable[[], Any]]] = {}  # folded value -> (instr, its copy)
    per: dict[int, list[Callable[[], Any]]] = {}  # instruction -> its steps
    for rec in m.records:
        new = pairs.get(rec.index)
        if new is not None:
            pass
        elif rec.kind == "kernel":
            new = _fold(m, rec, fixed, folded, written, once)
            if new is not None:
                copies[_single_out(rec)] = (rec.index, new[0])
            else:
                new = _prepare(m, rec, fixed, written, folded, unread=unread)
                if new is not None:
                    prepared.add(rec.index)
            if new is not None:
                substituted.add(rec.index)
        elif rec.kind == "free":
            new = []
        per[rec.index] = [rec.run] if new is None else new
    try:  # a copy whose source only it reads: the source's producer writes the copy's target
        forward_copies.forward(m, per, prepared, once,
                               lambda rec, out: _prepare(m, rec, fixed, written, folded, out),
                               facts)
    except Exception:  # noqa: BLE001 - an optimisation never fails a load
        pass
    dropped = _unread_copies(m, copies, substituted, facts)
    for index, new in per.items():
        new = [step for step in new if id(step) not in dropped]
        steps += new
        owner += [index] * len(new)
    return steps, owner


def _unread_copies(m: Method, copies: dict[int, tuple[int, Callable[[], Any]]],
                   substituted: set[int], facts: fold_bn.Facts) -> set[int]:
    """The copies of folded results into planned memory that nothing reads: every reader's
    steps were prepared with the folded array itself (e.g. ExecuTorch's programs transpose
    each linear weight with a ``permute_copy`` the matrix product then reads), the value is no
    method output, and no other value sharing its bytes is read before they are rewritten."""
    if not copies:
        return set()
    try:
        reads, where = facts.reads, facts.where
        return {id(step) for v, (idx, step) in copies.items()
                if all(r in substituted for r in reads.get(v, ()))
                and not fold_bn.alias_read(m, v, idx, where)}
    except Exception:  # noqa: BLE001 - an optimisation never fails a load: keep the copies
        return set()


def _fixed(m: Method, written: set[int]) -> set[int]:
    """Tensor values whose array keeps its bytes and sizes for the method's lifetime."""
    out = set()
    for i, v in enumerate(m._vals):
        if type(v) is not np.ndarray:
            continue
        slot = m._slots.get(i)
        if slot is None:
            if i not in written:
                out.add(i)  # a constant (a view of the program's data)
        elif (slot.buffer is not None and i not in m._bound
              and slot.dynamism == S.TensorShapeDynamism.STATIC):
            out.add(i)
    return out


def _arguments(m: Method, rec, fixed: set[int], written: set[int],
               folded: dict[int, np.ndarray] | None) -> list[Any] | None:
    """The kernel's arguments as arrays and Python values fixed at load, or None."""
    args = []
    for i in rec.args:
        v = m._vals[i]
        if folded is not None and i in folded:
            args.append(folded[i])
        elif type(v) is np.ndarray:
            if i not in fixed:
                return None
            args.append(v)
        elif isinstance(v, BoxedList):
            if v.kind is not S.TensorList or i in written or not all(j in fixed for j in v.items):
                return None
            args.append([folded[j] if folded is not None and j in folded else m._vals[j]
                         for j in v.items])
        elif i in written:
            return None
        else:
            args.append(v)
    return args


def _single_out(rec) -> int | None:
    """The out value of a one-output kernel call (its last argument, also its return slot)."""
    call = rec.call
    if len(call) < 2 or call[-1] != call[-2] or rec.outputs != (call[-1],):
        return None
    return call[-1]


class _Unread:
    """``unread(value, instruction)``: nothing reads ``value`` once that instruction wrote it
    (no reader, not a method output, no view of its bytes read before they are rewritten);
    the method's readers are listed on the first question."""

    def __init__(self, m: Method, facts: fold_bn.Facts) -> None:
        self.m, self.facts = m, facts

    def __call__(self, value: int, index: int) -> bool:
        return not self.facts.reads.get(value) and \
            not fold_bn.alias_read(self.m, value, index, self.facts.where)


def _prepare(m: Method, rec, fixed: set[int], written: set[int],
             folded: dict[int, np.ndarray], out: np.ndarray | None = None,
             unread: _Unread | None = None) -> list[Callable[[], Any]] | None:
    """The preparer's steps for ``rec``; ``out``: another array to write than its own out
    (the target of a copy forwarded to it, ``forward_copies``); ``unread``: which outputs
    nothing reads, for a preparer that takes None for them (``prepares(unread_outputs=)``)."""
    entry = get_kernel(rec.name)
    if entry.prepare is None or rec.description.endswith(" in place"):
        return None
    call = rec.call
    ret = m._vals[call[-1]]
    if isinstance(ret, BoxedList):  # several outputs: they must be the trailing out arguments
        if ret.kind is not S.TensorList or call[-1 - len(ret.items):-1] != ret.items:
            return None
        if not all(j in fixed for j in ret.items):
            return None
    elif call[-1] not in fixed or _single_out(rec) is None:
        return None
    args = _arguments(m, rec, fixed, written, folded)
    if args is None or len(args) != entry.num_args:
        return None
    if out is not None:
        args[-1] = out
    if entry.prepare_unread and unread is not None and isinstance(ret, BoxedList):
        full = list(args)
        try:
            for k, j in enumerate(ret.items):
                if unread(j, rec.index):
                    args[len(args) - len(ret.items) + k] = None
        except Exception:  # noqa: BLE001 - an optimisation never fails a load: compute all
            args = full
    try:
        steps = entry.prepare(*args)
    except Exception:  # noqa: BLE001 - an optimisation never fails a load: the kernel runs
        return None
    return None if steps is None else list(steps)


def _fold(m: Method, rec, fixed: set[int], folded: dict[int, np.ndarray], written: set[int],
          once: set[int]) -> list[Callable[[], Any]] | None:
    """Run an instruction whose inputs are all known at load; keep its result."""
    out = _single_out(rec)
    if out is None or out not in once or out not in fixed or _IMPURE.search(rec.name) or \
            rec.description.endswith(" in place"):
        return None
    for i in rec.args[:-1]:  # every input tensor a constant or a folded result
        v = m._vals[i]
        items = v.items if isinstance(v, BoxedList) else (i,) if type(v) is np.ndarray else ()
        if any(j in m._slots and j not in folded for j in items):
            return None
    target = m._vals[out]
    if target.nbytes > MAX_FOLD_BYTES:
        return _fold_view(m, rec, fixed, folded, written, out)
    args = _arguments(m, rec, fixed, written, folded)
    if args is None:
        return None
    own = np.empty_like(target)  # same sizes, dtype and layout as the planned tensor
    try:
        res = get_kernel(rec.name).fn(*args[:-1], own)
    except Exception:  # noqa: BLE001 - let the call fail at run time, where it is reported
        return None
    if res is not own:
        if type(res) is not np.ndarray or res.shape != own.shape:
            return None
        np.copyto(own, res, casting="unsafe")
    own.flags.writeable = False
    folded[out] = own
    # Planned memory is shared over time, and other values may alias these bytes (views the
    # emitter left as values of their own): the copy goes where the instruction was, always.
    return [partial(np.copyto, target, own)]


def _fold_view(m: Method, rec, fixed: set[int], folded: dict[int, np.ndarray],
               written: set[int], out: int) -> list[Callable[[], Any]] | None:
    """A large copy of a view of constants (ExecuTorch's ``permute_copy`` of a classifier's
    weight, 5 MB in MobileNetV2) is folded as the view itself, no memory taken: its readers'
    preparers get the view (a matrix product then reads the transposed weight in place, as
    torch's ``linear`` does, which may round differently from the product of the copy), and
    the copy into planned memory stays only for readers that read that memory."""
    steps = _prepare(m, rec, fixed, written, folded)
    if not steps or len(steps) != 1:
        return None
    step = steps[0]
    target = m._vals[out]
    if not (isinstance(step, partial) and step.func is np.copyto and not step.keywords
            and len(step.args) == 2 and step.args[0] is target):
        return None
    view = step.args[1]
    if type(view) is not np.ndarray or view.dtype != target.dtype or view.shape != target.shape:
        return None
    view = view.view()
    view.flags.writeable = False
    folded[out] = view
    return steps


def _single_writer(m: Method) -> set[int]:
    """Values written by exactly one instruction and by nothing else (not a method input, not
    a mutable buffer whose value outlives the call)."""
    count: dict[int, int] = {}
    for rec in m.records:
        for i in rec.outputs if rec.kind != "delegate" else rec.args:
            count[i] = count.get(i, 0) + 1
    skip = {int(i) for i in m._plan.inputs}
    for i, ev in enumerate(m._plan.values):
        t = ev.val
        if isinstance(t, S.Tensor) and t.allocation_info is not None:
            info = t.extra_tensor_info
            if t.data_buffer_idx > 0 or (info is not None and info.fully_qualified_name):
                skip.add(i)
    return {i for i, c in count.items() if c == 1 and i not in skip}
