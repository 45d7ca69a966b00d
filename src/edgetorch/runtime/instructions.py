"""Compiled instructions as records, and the loops that run them.

``load_method`` turns every instruction of the chain into an :class:`InstructionRecord`:
what it is (index, kind, operator or backend), which values it reads and writes, and the
pre-bound callable that runs it. Everything that needs to know about an instruction reads the
record: the loops, the event tracer, error context and ``str(method)``. Three loops:
:func:`run_steps` runs straight-line code (a method's closures or its load passes' steps, and
XNNPACK's nodes on its reference path), :func:`run_jumps` a method with jumps (under an
instruction budget), :func:`run_traced` either with one event per instruction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from ..errors import EdgeTorchError, InvalidProgramError, KernelError
from ..schema import program as S
from .event_tracer import UNSET_CHAIN_ID, UNSET_DEBUG_HANDLE, EventTracer, now_ns

Instr = Callable[[], Any]

# Instructions one ``execute`` may run before it is stopped as a runaway program (a jump
# that loops forever): ExecuTorch's ``ET_MAX_INSTRUCTIONS``, failing with InvalidProgram.
MAX_INSTRUCTIONS = 10_000_000

# Kernels ExecuTorch registers as prim ops: their calls get OPERATOR_CALL only (no
# native_call_* event, no logged outputs), as its runtime reports them.
_PRIM_PREFIXES = ("executorch_prim::",)
_PRIM_OPS = {"aten::sym_size.int", "aten::sym_numel", "aten::sym_stride.int",
             "aten::_local_scalar_dense"}


class Kind(str, Enum):
    """What an instruction is (a ``str``: ``Kind.KERNEL == "kernel"``)."""

    KERNEL = "kernel"
    DELEGATE = "delegate"
    MOVE = "move"
    JUMP_FALSE = "jump_false"
    FREE = "free"


@dataclass(frozen=True)
class InstructionRecord:
    """One instruction of a loaded method.

    ``kind`` is a :class:`Kind` (kernel, delegate, move, jump_false or free);
    ``name`` the operator (``"aten::add.out"``) or backend id; ``args`` the value indices read
    and ``outputs`` those written; ``source`` the user's line when the program was exported
    with ``emit_stacktrace=True``.
    """

    index: int
    kind: Kind
    name: str
    args: tuple[int, ...]
    outputs: tuple[int, ...]
    run: Instr
    description: str
    source: str | None = None
    # For tracing: outputs logged as one value each (a TensorList output is one entry).
    logged_outputs: tuple[int, ...] = ()
    # A kernel call's value indices as the program lists them, the return slot last.
    call: tuple[int, ...] = ()
    # A kernel call without a return slot: it writes its first argument in place.
    in_place: bool = False

    @property
    def is_prim(self) -> bool:
        return self.kind is Kind.KERNEL and (self.name.startswith(_PRIM_PREFIXES)
                                          or self.name in _PRIM_OPS)

    @property
    def native_call_name(self) -> str | None:
        """``native_call_<op>.<overload>`` (the kernel wrapper's event), or None."""
        if self.kind is not Kind.KERNEL or self.is_prim:
            return None
        return "native_call_" + self.name.partition("::")[2]


def kernel_io(plan: S.ExecutionPlan, call_args: Sequence[int]
               ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(values read, values written, values logged as outputs) of a KernelCall. The return
    slot, or the tensors of a TensorList return slot, is written. ExecuTorch's kernel wrapper
    logs each out argument: the tensors of a multi-output op one by one, but a ``Tensor[]``
    out argument (the same list passed as an argument) as one list."""
    args = tuple(map(int, call_args))
    ret = args[-1]
    val = plan.values[ret].val if 0 <= ret < len(plan.values) else None
    if not isinstance(val, S.TensorList):
        return args[:-1], (ret,), (ret,)
    outs = tuple(int(i) for i in val.items)
    for a in args[:-1]:
        v = plan.values[a].val if 0 <= a < len(plan.values) else None
        if isinstance(v, S.TensorList) and tuple(int(i) for i in v.items) == outs:
            return args[:-1], outs, (ret,)
    return args[:-1], outs, outs


def sources(chain: S.Chain) -> dict[int, str]:
    """Instruction -> ``file:line in function`` of the user's frame, when the program was
    exported with ``emit_stacktrace=True`` (the chain's ``stacktrace``)."""
    out = {}
    for pc, frames in enumerate(chain.stacktrace or []):
        items = getattr(frames, "items", None) or []
        if items:
            f = items[-1]
            out[pc] = f"{f.filename}:{f.lineno} in {f.name}"
    return out


def run_jumps(records: Sequence[InstructionRecord], instrs: Sequence[Instr], method: str,
              budget: int = MAX_INSTRUCTIONS) -> None:
    """The loop of a method with jumps: each pre-bound callable returns the next instruction;
    at most ``budget`` instructions run (a straight-line chain, bounded by its length, runs
    in :func:`run_steps`)."""
    pc, n, left = 0, len(instrs), budget
    try:
        while pc < n:
            if left == 0:
                raise _over_budget(method, budget)
            left -= 1
            pc = instrs[pc]()
    except Exception as e:
        _raise_in_context(e, method, records, pc)


def _over_budget(method: str, budget: int) -> InvalidProgramError:
    return InvalidProgramError(
        f"method {method!r} executed {budget} instructions without finishing: a jump loops "
        "forever, or the program needs a larger budget (load_method(name, max_instructions=N); "
        f"ExecuTorch stops at ET_MAX_INSTRUCTIONS = {MAX_INSTRUCTIONS})")


def run_steps(steps: Sequence[Instr], fail: Callable[[int, Exception], None],
              each: Callable[[int, int, int], None] | None = None) -> None:
    """The straight-line loop (a method's steps, a delegate's nodes): each step in turn;
    ``fail(k, error)`` raises the error of step ``k`` in its context; ``each(k, start, end)``
    (an event tracer's, in ns) is told about every step when given."""
    k = -1
    try:
        if each is None:
            for k, fn in enumerate(steps):  # noqa: B007 (k names the failing step)
                fn()
        else:
            for k, fn in enumerate(steps):  # noqa: B007
                start = now_ns()
                fn()
                each(k, start, now_ns())
    except Exception as e:
        fail(k, e)


def run_traced(records: Sequence[InstructionRecord], values: list[Any], tracer: EventTracer,
               method: str, chain: int = 0, budget: int = MAX_INSTRUCTIONS) -> None:
    """The same run, reporting each instruction to ``tracer`` as ExecuTorch's runtime does."""
    pc, n, left = 0, len(records), budget
    log_values = tracer.log_intermediate_outputs
    try:
        while pc < n:
            if left == 0:
                raise _over_budget(method, budget)
            left -= 1
            rec = records[pc]
            tracer.set_instruction(chain, pc)
            start = now_ns()
            nxt = rec.run()
            if rec.kind is Kind.KERNEL:
                end = now_ns()
                native = rec.native_call_name  # None for prim ops: OPERATOR_CALL only
                if native is not None:
                    if log_values:
                        for idx in rec.logged_outputs:
                            tracer.log_evalue(_resolve(values, idx))
                    tracer.log_profiling(native, chain, pc, start, end)
                tracer.log_profiling("OPERATOR_CALL", chain, pc, start, now_ns())
            elif rec.kind is Kind.DELEGATE:
                if log_values:
                    for idx in rec.args:
                        tracer.log_evalue(_resolve(values, idx))
                tracer.log_profiling("DELEGATE_CALL", chain, pc, start, now_ns())
            pc = nxt
    except Exception as e:
        _raise_in_context(e, method, records, pc)
    finally:
        tracer.set_instruction(UNSET_CHAIN_ID, UNSET_DEBUG_HANDLE)


def _raise_in_context(e: Exception, method: str, records: Sequence[InstructionRecord],
                      pc: int) -> None:
    new = with_context(e, method, records[pc] if 0 <= pc < len(records) else None)
    if new is e:
        raise e
    raise new from e


def _resolve(values: list[Any], idx: int) -> Any:
    v = values[idx]
    items = getattr(v, "items", None)  # a boxed TensorList: log its tensors as one list
    if items is not None and not isinstance(v, np.ndarray):
        return [values[i] for i in items]
    return v


def call_kernel(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` under ``execute``'s rule for what a kernel raises (the plain loop's,
    :func:`run_steps` with :func:`with_context`): an edgetorch error as it is, anything else
    as a ``KernelError``. For a load pass that runs a kernel early (constant folding) or asks
    whether it accepts a file's arguments: a kernel that fails on them is left to fail at run
    time, in context, as without the pass."""
    result: list[Any] = []

    def fail(_: int, e: Exception) -> None:
        raise with_context(e, "(a load pass)", None) from e

    run_steps([lambda: result.append(fn(*args))], fail)
    return result[0]


def with_context(e: Exception, method: str, rec: InstructionRecord | None) -> Exception:
    """The error to raise for ``e`` escaping instruction ``rec`` of ``method``.

    An edgetorch error keeps its class and code with the method, instruction and operator
    put in front of its message; anything else (a kernel's bug) becomes a ``KernelError``.
    Either way the original is chained as ``__cause__``.
    """
    where = f"method {method!r} instruction {rec.index} ({rec.description})" if rec else \
        f"method {method!r}"
    if rec is not None and rec.source:
        where += f" from {rec.source}"
    if isinstance(e, EdgeTorchError):
        message = Exception.__str__(e)
        if message.startswith(f"method {method!r} instruction "):
            return e  # already placed (a nested method call)
        try:
            new = type(e)(f"{where}: {message}", code=e.code)
        except TypeError:  # a subclass with its own constructor: annotate the original
            e.add_note(f"raised by {where}")
            return e
    else:
        new = KernelError(f"{where} failed: {type(e).__name__}: {e}")
    # For tools that want the place without parsing the message.
    new.method = method  # type: ignore[attr-defined]
    new.instruction = rec.index if rec else None  # type: ignore[attr-defined]
    new.operator = rec.name if rec else None  # type: ignore[attr-defined]
    return new
