"""``Method``: a loaded execution plan, its memory, and its instructions compiled to callables.

Loading does all the work that can be done once: arenas are allocated at their planned sizes,
every tensor becomes a view at its planned offset, every operator is resolved to a kernel (a
missing one is an error here, naming it), and every instruction becomes a pre-bound closure.
``execute`` then validates the inputs, copies them into their slots and runs the closures.
Each instruction is kept as an ``InstructionRecord`` (``instructions.py``): the event tracer,
error context and ``str(method)`` read it; the plain loop only calls the closures.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import (
    EdgeTorchError,
    ErrorCode,
    InvalidArgumentError,
    InvalidProgramError,
    KernelError,
    MemoryAllocationError,
    MethodBusyError,
)
from ..kernels import accel
from ..kernels.portable._util import can_cast
from ..kernels.registry import NO_RETURN_SLOT, get_kernel
from ..schema import program as S
from . import optimize
from .backends import BackendExecutionContext, BackendInitContext, get_backend
from .buffers import BufferTable, MutableBuffer
from .event_tracer import UNSET_CHAIN_ID, UNSET_DEBUG_HANDLE, now_ns
from .instructions import (
    MAX_INSTRUCTIONS,
    Instr,
    InstructionRecord,
    Kind,
    _raise_in_context,
    kernel_io,
    run_jumps,
    run_steps,
    run_traced,
    sources,
)
from .interop import is_torch_tensor, to_numpy, to_torch
from .meta import MethodMeta, TensorInfo, method_meta
from .quiet import Quiet
from .values import (
    DTYPES,
    MAX_UNPLANNED_BYTES,
    BoxedList,
    TensorSlot,
    allocate_arenas,
    contiguous_order,
    dtype_of,
    strided_view,
)

if TYPE_CHECKING:
    from .program import Program


_DYNAMISM = dict(S.TensorShapeDynamism._value2member_map_)


class Method:
    """One method of a loaded program, ready to ``execute``."""

    def __init__(self, program: Program, plan: S.ExecutionPlan,
                 max_instructions: int = MAX_INSTRUCTIONS,
                 optimize_: bool | set[str] | None = None) -> None:
        init_start = now_ns()
        if max_instructions < 1:
            raise InvalidArgumentError(f"max_instructions must be positive, got {max_instructions}")
        # A program with jumps stops after this many instructions per execute (ExecuTorch's
        # ET_MAX_INSTRUCTIONS); straight-line programs are bounded by their length.
        self.max_instructions = int(max_instructions)
        self._program = program
        # Chosen once: without a tracer, execute runs the plain loop and pays nothing.
        self.event_tracer = program.event_tracer
        self._plan = plan
        self.name = plan.name
        self._busy = threading.Lock()  # one execute at a time: the values and arenas are shared
        self._rebuilding = False  # the warm-up thread holds _busy: a call waits, not raises
        self._meta = method_meta(plan)
        self._arenas = allocate_arenas(list(plan.non_const_buffer_sizes), plan.name,
                                       plan.non_const_buffer_device)
        self._vals: list[Any] = []
        self._slots: dict[int, TensorSlot] = {}
        self.buffers = BufferTable(plan.name)
        # Tensors neither planned nor constants of the program: bound at run time.
        self._bound: set[int] = set()
        self._buffer_values: set[int] = set()  # mutable buffers: their values outlive a call
        self._materialize_values()
        # Which load passes run (optimize/): the delegates' init runs its backend's passes.
        opts = optimize.options(optimize_, optimize.PASSES, self.name)
        #: What the load passes did (``str()`` prints it): which ran, which failed and why.
        self.load_report = opts.report
        self._optimize = opts
        self.records: list[InstructionRecord] = []
        self._instrs: list[Instr] = []
        self._delegate_handles: list[Any] = []
        self._has_jumps = False
        self._compile()
        self._prepare_io()
        # The plain loop's steps after the load passes (None: the records' closures run),
        # silenced once per call (quiet.py), and how a failing step names its instruction.
        # Built here, so the first execute runs them as every later one does. While the
        # compiled kernels warm up (accel.pending) they take the NumPy paths, so they are
        # built again once it is done (or they keep those for good): by the warm-up thread
        # (accel.after_warm_up), or else at the first execute after it.
        self._quiet = Quiet()
        self._steps: tuple[list[Any], list[int]] | None = None
        self._fail = self._failing(None)
        self._rerun_when_warm = False
        if not self._has_jumps:
            self._run_load_passes()
        if any(getattr(h, "warming", False) for _, h in self._delegate_handles):
            self._rerun_when_warm = True
        if self._rerun_when_warm:
            accel.after_warm_up(self._rebuild_after_warm_up)
        # Backends get their handles back when the method goes away, as ExecuTorch's do.
        weakref.finalize(self, _destroy_delegates, self._delegate_handles)
        self.last_run_seconds = 0.0
        if self.event_tracer is not None:
            self.event_tracer.log_profiling("Method::init", UNSET_CHAIN_ID, UNSET_DEBUG_HANDLE,
                                            init_start, now_ns())

    # ---- loading ---------------------------------------------------------------------

    @property
    def metadata(self) -> MethodMeta:
        return self._meta

    def _where(self, i: int) -> str:
        return f"method {self.name!r} value {i}"

    def _materialize_values(self) -> None:
        pte = self._program._pte
        append = self._vals.append
        n = len(self._plan.values)
        boxed = []
        for i, ev in enumerate(self._plan.values):
            v = ev.val
            kind = type(v)
            if kind is S.Tensor:
                append(self._tensor_value(i, v, pte))
            elif kind in _SCALAR_FIELD:
                append(getattr(v, _SCALAR_FIELD[kind]))
            elif kind is S.DoubleList or kind is S.BoolList:
                append(list(v.items))
            elif kind in _BOXED:
                items = tuple(map(int, v.items))
                if items and (max(items) >= n or min(items) < 0 and kind is not S.OptionalTensorList):
                    x = next(x for x in items
                             if x >= n or x < 0 and kind is not S.OptionalTensorList)
                    raise InvalidProgramError(
                        f"{self._where(i)}: list item {x} is not a value index (0..{n - 1})")
                boxed.append(i)
                append(BoxedList(kind, items))
            else:
                append(None)
        self._check_list_items(boxed)
        # Int lists of constants never change: resolve them once.
        written = self._written = self._written_slots()
        vals = self._vals
        for i in boxed:
            v = vals[i]
            if v.kind is S.IntList and written.isdisjoint(v.items):
                vals[i] = [vals[j] for j in v.items]

    def _check_list_items(self, boxed: list[int]) -> None:
        """Each list holds values of its element kind, as ExecuTorch's parser requires: a
        TensorList holds tensors (never a list -- no list can contain itself or another list,
        so values form no cycles), an IntList ints."""
        values = self._plan.values
        for i in boxed:
            v = values[i].val
            want = _LIST_ITEMS[type(v)]
            for x in v.items:
                x = int(x)
                if x < 0:  # (only an OptionalTensorList may say None; checked above)
                    continue
                if type(values[x].val) not in want:
                    raise InvalidProgramError(
                        f"{self._where(i)}: {type(v).__name__} item {x} is a "
                        f"{type(values[x].val).__name__}, not a "
                        f"{' or '.join(k.__name__ for k in want)}")

    def _tensor_value(self, i: int, t: S.Tensor, pte: Any) -> np.ndarray | None:
        dtype = DTYPES.get(t.scalar_type)
        if dtype is None:
            dtype = dtype_of(t.scalar_type, self._where(i))  # (raises, naming the type)
        sizes = tuple(map(int, t.sizes))
        dim_order = tuple(map(int, t.dim_order))
        if (len(dim_order) != len(sizes) or not contiguous_order(dim_order) and
                sorted(dim_order) != list(range(len(sizes)))) or (sizes and min(sizes) < 0):
            raise InvalidProgramError(
                f"{self._where(i)}: sizes {list(sizes)} / dim_order {list(dim_order)} are inconsistent")
        if t.storage_offset != 0:  # as ExecuTorch's tensor parser
            raise InvalidProgramError(
                f"{self._where(i)}: non-zero storage offset {t.storage_offset} is not supported",
                code=ErrorCode.NotSupported)
        nbytes = math.prod(sizes) * dtype.itemsize
        dynamism = _DYNAMISM.get(t.shape_dynamism)
        if dynamism is None:
            raise InvalidProgramError(
                f"{self._where(i)}: shape_dynamism {t.shape_dynamism} is not a TensorShapeDynamism")
        info = t.extra_tensor_info
        external = info is not None and info.location == S.TensorDataLocation.EXTERNAL
        if (t.data_buffer_idx > 0 or external) and t.allocation_info is None:
            data = self._program._constant(int(t.data_buffer_idx), t, i, self.name)
            if len(data) < nbytes:
                raise InvalidProgramError(
                    f"{self._where(i)}: constant {t.data_buffer_idx} holds {len(data)} bytes, the "
                    f"tensor {list(sizes)} needs {nbytes}")
            if t.data_buffer_idx == 0:  # (external data: bound like the unplanned)
                self._bound.add(i)
            return strided_view(data, 0, dtype, sizes, dim_order)
        if t.allocation_info is not None:
            mem_id = int(t.allocation_info.memory_id)
            offset = t.allocation_info.memory_offset
            if not 0 < mem_id < len(self._arenas):
                raise InvalidProgramError(
                    f"{self._where(i)}: memory id {mem_id} has no planned buffer "
                    f"(the method plans {len(self._arenas) - 1})")
            arena = self._arenas[mem_id]
            assert arena is not None  # index 0 (None) was excluded above
            if offset + nbytes > arena.size:
                raise InvalidProgramError(
                    f"{self._where(i)}: tensor of {nbytes} bytes at offset {offset} overflows "
                    f"planned buffer {mem_id} of {arena.size} bytes")
            slot = TensorSlot(i, dtype, dim_order, sizes, dynamism, arena, offset)
            self._slots[i] = slot
            view = slot.view(sizes)
            info = t.extra_tensor_info
            if t.data_buffer_idx > 0 or (info is not None and info.fully_qualified_name):
                self._register_buffer(i, t, view, nbytes)
            return view
        # Not planned: bound at run time (inputs, views, delegate outputs) or owned here.
        if nbytes > MAX_UNPLANNED_BYTES:
            raise MemoryAllocationError(
                f"{self._where(i)}: unplanned tensor of {nbytes} bytes is too large")
        own = np.zeros(max(nbytes, 1), dtype=np.uint8)
        self._bound.add(i)
        slot = TensorSlot(i, dtype, dim_order, sizes, dynamism, own, 0)
        self._slots[i] = slot
        return slot.view(sizes)

    # ---- mutable buffers ----------------------------------------------------------------

    def _register_buffer(self, i: int, t: S.Tensor, view: np.ndarray, nbytes: int) -> None:
        """A planned tensor with a name or an initial state is a mutable buffer: it keeps its
        value across ``execute`` calls."""
        initial = None
        if t.data_buffer_idx > 0:
            initial = self._program._mutable_initial(int(t.data_buffer_idx), t, nbytes, self.name)
        info = t.extra_tensor_info
        name = info.fully_qualified_name if info is not None and info.fully_qualified_name else f"value_{i}"
        self._buffer_values.add(i)
        self.buffers.add(MutableBuffer(name, view, self._slots[i].dim_order, initial))

    @property
    def buffer_names(self) -> list[str]:
        """Names of the method's mutable buffers (fully qualified, e.g. ``layers.0.k_cache``)."""
        return self.buffers.names

    def get_buffer(self, name: str) -> np.ndarray:
        """A copy of buffer ``name``'s current value."""
        return self.buffers.get(name)

    def set_buffer(self, name: str, value: Any) -> None:
        """Overwrite buffer ``name`` (same shape; cast to its dtype)."""
        self.buffers.set(name, value)

    def reset_buffers(self) -> None:
        """Put every mutable buffer back to its initial state."""
        self.buffers.reset()

    def _run_load_passes(self) -> None:
        self._rerun_when_warm = accel.pending()
        self._steps = optimize.run_passes(self._dataflow(), self._optimize)
        self._fail = self._failing(self._steps[1] if self._steps is not None else None)

    def _rebuild_for_compiled_kernels(self) -> None:
        """The compiled kernels are ready: the steps and the delegates' plans built with the
        NumPy paths are built again (``_busy`` held)."""
        if not self._has_jumps:
            self._run_load_passes()
        self._rerun_when_warm = False
        for backend, handle in self._delegate_handles:
            rebuild = getattr(backend, "after_warm_up", None)
            if rebuild is not None:
                rebuild(handle)

    def _rebuild_after_warm_up(self) -> None:
        """(The warm-up thread.) Rebuild now, between calls: a call made meanwhile waits for
        it. A typed error is left to the next execute, which rebuilds and raises in context."""
        self._rebuilding = True
        try:
            with self._busy:
                if self._rerun_when_warm and not accel.pending():
                    try:
                        self._rebuild_for_compiled_kernels()
                    except EdgeTorchError:
                        self._rerun_when_warm = True
        finally:
            self._rebuilding = False  # (after the release: a waiting call sees it set)

    def _dataflow(self) -> optimize.Dataflow:
        return optimize.Dataflow(self.name, self._vals, self._slots, self._bound, self._written,
                                 self.records, map(int, self._plan.inputs), self._outputs,
                                 self._buffer_values)

    def _written_slots(self) -> set[int]:
        written = set(int(i) for i in self._plan.inputs)
        for chain in self._plan.chains:
            for ins in chain.instructions:
                a = ins.instr_args
                if isinstance(a, (S.KernelCall, S.DelegateCall)) and a.args:
                    written.add(int(a.args[-1]))
                    ret = self._plan.values[int(a.args[-1])].val if int(a.args[-1]) < len(self._plan.values) else None
                    if isinstance(ret, S.TensorList):
                        written.update(int(x) for x in ret.items)
                    if isinstance(a, S.DelegateCall):
                        written.update(int(x) for x in a.args)
                elif isinstance(a, S.MoveCall):
                    written.add(int(a.move_to))
        return written

    # ---- instruction compilation ---------------------------------------------------------

    def _arg_getter(self, idx: int, where: str) -> Callable[[], Any] | int:
        """An index to read directly, or a resolver for a boxed list."""
        if not 0 <= idx < len(self._vals):
            raise InvalidProgramError(f"{where}: argument {idx} is not a value index "
                                      f"(0..{len(self._vals) - 1})")
        v = self._vals[idx]
        if isinstance(v, BoxedList):
            return v.resolver(self._vals)
        return idx

    def _compile(self) -> None:
        if not self._plan.chains:
            return
        if len(self._plan.chains) > 1:
            raise InvalidProgramError(f"method {self.name!r}: {len(self._plan.chains)} chains; "
                                      "this runtime runs single-chain methods")
        chain = self._plan.chains[0]
        instructions = chain.instructions
        where_from = sources(chain)
        for pc, ins in enumerate(instructions):
            a = ins.instr_args
            where = f"method {self.name!r} instruction {pc}"
            if isinstance(a, S.KernelCall):
                call = tuple(map(int, a.args))
                fn, desc, in_place = self._compile_kernel(pc, a.op_index, call, where)
                name = self._plan.operators[a.op_index].qualified_name
                args, outs, logged = kernel_io(self._plan, call)
                if in_place:  # no return slot: the first argument is written
                    args, outs, logged = call, args[:1], args[:1]
                rec = InstructionRecord(pc, Kind.KERNEL, name, args, outs, fn, desc,
                                        where_from.get(pc), logged, call, in_place)
            elif isinstance(a, S.DelegateCall):
                fn, desc = self._compile_delegate(pc, a, where)
                name = self._plan.delegates[a.delegate_index].id
                args = tuple(int(x) for x in a.args)
                rec = InstructionRecord(pc, Kind.DELEGATE, name, args, args, fn, desc, where_from.get(pc))
            elif isinstance(a, S.MoveCall):
                fn, desc = self._compile_move(pc, a, where)
                rec = InstructionRecord(pc, Kind.MOVE, "move", (int(a.move_from),),
                                        (int(a.move_to),), fn, desc)
            elif isinstance(a, S.JumpFalseCall):
                fn, desc = self._compile_jump(pc, a, where, len(instructions))
                self._has_jumps = True
                rec = InstructionRecord(pc, Kind.JUMP_FALSE, "jump_false",
                                        (int(a.cond_value_index),), (), fn, desc)
            elif isinstance(a, S.FreeCall):
                fn, desc = self._compile_free(pc, a, where)
                rec = InstructionRecord(pc, Kind.FREE, "free", (int(a.value_index),), (), fn, desc)
            else:
                raise InvalidProgramError(f"{where}: unknown instruction {type(a).__name__}")
            self.records.append(rec)
            self._instrs.append(fn)

    def _compile_kernel(self, pc: int, op_index: int, call: tuple[int, ...],
                        where: str) -> tuple[Instr, str, bool]:
        """(the closure, its description, whether it writes its first argument in place)."""
        ops = self._plan.operators
        if not 0 <= op_index < len(ops):
            raise InvalidProgramError(f"{where}: operator index {op_index} out of range "
                                      f"(the method lists {len(ops)} operators)")
        name = ops[op_index].qualified_name
        entry = get_kernel(name)
        args = list(call)
        if len(args) == entry.num_args and name in NO_RETURN_SLOT:
            return (*self._compile_in_place(pc, entry.fn, name, args, where), True)
        if len(args) != entry.num_args + 1:
            raise InvalidProgramError(
                f"{where}: {name} is called with {len(args)} values; its kernel takes "
                f"{entry.num_args} arguments plus the return slot")
        getters = [self._arg_getter(x, where) for x in args]
        ret = args[-1]
        fn = entry.fn
        vals = self._vals
        store = self._store
        desc = f"{name}({', '.join(map(str, args[:-1]))}) -> {ret}"
        plain = all(isinstance(g, int) for g in getters[:-1])
        in_idx = tuple(getters[:-1])

        if plain and len(in_idx) == 1:
            only = int(in_idx[0])  # type: ignore[arg-type]

            def run() -> int:
                res = fn(vals[only])
                if res is not vals[ret]:
                    store(ret, res, name)
                return pc + 1
        elif plain and in_idx:
            get = itemgetter(*in_idx)  # one C call gathers the arguments

            def run() -> int:
                res = fn(*get(vals))
                if res is not vals[ret]:
                    store(ret, res, name)
                return pc + 1
        else:
            def run() -> int:
                res = fn(*[vals[g] if isinstance(g, int) else g() for g in in_idx])
                if res is not vals[ret]:
                    store(ret, res, name)
                return pc + 1
        return run, desc, False

    def _compile_in_place(self, pc: int, fn: Callable[..., Any], name: str, args: list[int],
                          where: str) -> tuple[Instr, str]:
        """A call without a return slot: the kernel sees its first argument at full planned size
        and returns that argument's new value, a view of the same bytes (resized in place)."""
        getters = [self._arg_getter(x, where) for x in args]
        target = args[0]
        slot = self._slots.get(target)
        if slot is None or slot.buffer is None:
            raise InvalidProgramError(f"{where}: {name} writes value {target} in place, which is "
                                      "not a planned tensor")
        full = slot.view(slot.bound)
        vals = self._vals
        rest = getters[1:]

        def run() -> int:
            res = np.asarray(fn(full, *[vals[g] if isinstance(g, int) else g() for g in rest]))
            if res.shape != vals[target].shape:
                slot.check_resize(res.shape, f"{name} (value {target})")
                vals[target] = slot.view(res.shape)
            return pc + 1
        return run, f"{name}({', '.join(map(str, args))}) in place"

    def _compile_delegate(self, pc: int, call: S.DelegateCall, where: str) -> tuple[Instr, str]:
        delegates = self._plan.delegates
        if not 0 <= call.delegate_index < len(delegates):
            raise InvalidProgramError(f"{where}: delegate index {call.delegate_index} out of range")
        delegate = delegates[call.delegate_index]
        backend = get_backend(delegate.id)
        blob = self._program._delegate_data(delegate, self.name)
        specs = {cs.key: bytes(cs.value) for cs in delegate.compile_specs}
        static = S.TensorShapeDynamism.STATIC
        static_shapes = all(self._slots[int(i)].dynamism == static for i in call.args
                            if int(i) in self._slots)
        try:
            handle = backend.init(blob, specs, BackendInitContext(
                self.name, self._program.named_data,
                self._program.backend_options.get(delegate.id, {}), self._program.folder,
                self._optimize, static_shapes))
        except EdgeTorchError:
            raise
        except Exception as e:  # the backend's own parser refused its blob
            raise InvalidProgramError(
                f"{where}: backend {delegate.id!r} cannot initialize its delegate "
                f"({type(e).__name__}: {e}); re-export the program for this backend version",
                code=ErrorCode.DelegateInvalidCompatibility) from e
        self._delegate_handles.append((backend, handle))
        args = [int(x) for x in call.args]
        for x in args:
            self._arg_getter(x, where)
        vals = self._vals
        context = BackendExecutionContext(self.name, self._resize_delegate_output,
                                          self.event_tracer)

        def run() -> int:
            backend.execute(handle, vals, args, context)
            return pc + 1
        return run, f"delegate {delegate.id}({', '.join(map(str, args))})"

    def _resize_delegate_output(self, idx: int, sizes: tuple[int, ...]) -> np.ndarray:
        slot = self._slots.get(idx)
        if slot is None:
            raise KernelError(f"method {self.name!r}: a delegate asked to resize value {idx}, "
                              "which is not a tensor of this method")
        sizes = tuple(int(s) for s in sizes)
        slot.check_resize(sizes, f"delegate output (value {idx})")
        view = slot.view(sizes)
        self._vals[idx] = view
        return view

    def _compile_move(self, pc: int, call: S.MoveCall, where: str) -> tuple[Instr, str]:
        src, dst = int(call.move_from), int(call.move_to)
        self._arg_getter(src, where)
        self._arg_getter(dst, where)
        vals = self._vals
        store = self._store
        dst_is_tensor = dst in self._slots  # decided at load, not per call

        def run() -> int:
            value = vals[src]
            if dst_is_tensor and isinstance(value, np.ndarray):
                store(dst, value, "move")
            else:
                vals[dst] = value
            return pc + 1
        return run, f"move {src} -> {dst}"

    def _compile_free(self, pc: int, call: S.FreeCall, where: str) -> tuple[Instr, str]:
        idx = int(call.value_index)
        self._arg_getter(idx, where)
        if not isinstance(self._plan.values[idx].val, S.Tensor):
            raise InvalidProgramError(f"{where}: free of value {idx}, which is not a tensor")

        def run() -> int:  # memory is planned; nothing to release
            return pc + 1
        return run, f"free {call.value_index}"

    def _compile_jump(self, pc: int, call: S.JumpFalseCall, where: str, n: int) -> tuple[Instr, str]:
        cond, dest = int(call.cond_value_index), int(call.destination_instruction)
        self._arg_getter(cond, where)
        if not 0 <= dest <= n:
            raise InvalidProgramError(f"{where}: jump destination {dest} out of range (0..{n})")
        vals = self._vals

        def run() -> int:
            c = vals[cond]
            return pc + 1 if bool(c.item() if isinstance(c, np.ndarray) else c) else dest
        return run, f"jump_false {cond} -> {dest}"

    # ---- storing results ---------------------------------------------------------------

    def _store(self, idx: int, res: Any, op: str) -> None:
        """Put a kernel's result into value ``idx``: copy into its planned bytes (resizing a
        dynamic tensor within its bound) or bind it when the value is not planned."""
        target = self._vals[idx]
        if isinstance(target, BoxedList):  # multi-output: a TensorList of out values
            if not isinstance(res, (tuple, list)) or len(res) != len(target.items):
                raise KernelError(f"{op} returned {type(res).__name__}, expected "
                                  f"{len(target.items)} tensors")
            for i, r in zip(target.items, res):
                if r is not self._vals[i]:
                    self._store(i, r, op)
            return
        if not isinstance(target, np.ndarray):
            self._vals[idx] = res  # scalar results (symbolic sizes)
            return
        res = np.asarray(res)
        if res.dtype != target.dtype and not can_cast(res.dtype, target.dtype):
            raise KernelError(
                f"{op} produced {res.dtype} values for value {idx}, which the program declares "
                f"{target.dtype}; the kernel's result cannot be cast to it (as ExecuTorch's "
                "canCast): the program is inconsistent", code=ErrorCode.InvalidArgument)
        slot = self._slots.get(idx)
        if res.shape != target.shape:
            if slot is None:
                raise KernelError(f"{op}: result shape {res.shape} does not fit value {idx}")
            if self._is_bound_slot(idx):
                self._vals[idx] = res.astype(slot.dtype, copy=False)
                return
            slot.check_resize(res.shape, f"{op} output (value {idx})")
            target = slot.view(res.shape)
            self._vals[idx] = target
        elif self._is_bound_slot(idx):
            self._vals[idx] = res.astype(slot.dtype, copy=False) if slot else res
            return
        np.copyto(target, res, casting="unsafe")

    def _is_bound_slot(self, idx: int) -> bool:
        """Unplanned values (views, runtime-provided outputs) take the kernel's array as is."""
        return idx in self._bound

    # ---- execution ---------------------------------------------------------------------

    def _prepare_io(self) -> None:
        """What ``execute`` needs per call, worked out once: for each input tensor, the
        (value index, dtype, planned sizes, full-size view or None when the runtime binds the
        caller's array) of its fast path; the output indices."""
        fast: list[tuple[int, np.dtype, tuple[int, ...], np.ndarray | None]] | None = []
        for idx in self._plan.inputs:
            idx = int(idx)
            slot = self._slots.get(idx)
            if slot is None or not isinstance(self._plan.values[idx].val, S.Tensor):
                fast = None  # scalars, lists or a corrupt input: the general path checks them
                break
            full = None if self._is_bound_slot(idx) else slot.view(slot.bound)
            fast.append((idx, slot.dtype, slot.bound, full))
        self._fast_inputs = fast
        self._n_inputs = len(self._plan.inputs)
        self._outputs = tuple(int(i) for i in self._plan.outputs)

    def _set_inputs_fast(self, inputs: Sequence[Any]) -> bool:
        """Every input an ndarray of its planned dtype and sizes (the common case): copy them
        in with no further checks and return True; otherwise change nothing, return False."""
        fast = self._fast_inputs
        if fast is None or len(inputs) != self._n_inputs:
            return False
        if self._n_inputs == 1:  # the usual case, without the loops
            x = inputs[0]
            idx, dtype, bound, full = fast[0]
            if type(x) is not np.ndarray or x.dtype != dtype or x.shape != bound:
                return False
            if full is None:
                self._vals[idx] = x
            else:
                self._vals[idx] = full
                np.copyto(full, x)
            return True
        for (_, dtype, bound, _), x in zip(fast, inputs):
            if type(x) is not np.ndarray or x.dtype != dtype or x.shape != bound:
                return False
        vals = self._vals
        for (idx, _, _, full), x in zip(fast, inputs):
            if full is None:
                vals[idx] = x
            else:
                vals[idx] = full  # a previous call may have re-viewed it at smaller sizes
                np.copyto(full, x)
        return True

    def _set_inputs(self, inputs: Sequence[Any]) -> None:
        plan_inputs = self._plan.inputs
        if len(inputs) != len(plan_inputs):
            raise InvalidArgumentError(
                f"method {self.name!r} takes {len(plan_inputs)} input(s) "
                f"({', '.join(str(self._meta.input_tensor_meta(i)) for i in range(len(plan_inputs)))}), "
                f"got {len(inputs)}")
        staged = []
        for n, (idx, x) in enumerate(zip(plan_inputs, inputs)):
            expected = self._plan.values[idx].val
            if isinstance(expected, S.Tensor):
                staged.append((idx, self._check_tensor_input(n, idx, expected, to_numpy(x))))
            else:
                staged.append((idx, x))
        for idx, x in staged:  # nothing is written until every input checked out
            slot = self._slots.get(idx)
            if isinstance(x, np.ndarray) and slot is not None:
                if self._is_bound_slot(idx):
                    self._vals[idx] = x
                    continue
                target = self._vals[idx]
                if target.shape != x.shape:
                    target = slot.view(x.shape)
                    self._vals[idx] = target
                np.copyto(target, x)
            else:
                self._vals[idx] = x

    def _check_tensor_input(self, n: int, idx: int, t: S.Tensor, x: Any) -> np.ndarray:
        info = self._meta.input_tensor_meta(n)
        assert isinstance(info, TensorInfo)
        if not isinstance(x, np.ndarray):
            raise InvalidArgumentError(
                f"method {self.name!r} input {n}: expected a tensor {info}, got {type(x).__name__}")
        slot = self._slots.get(idx)
        if slot is None:  # a constant declared as an input: only a corrupt file does that
            raise InvalidProgramError(f"method {self.name!r} input {n} (value {idx}) is a "
                                      "constant tensor, not an input; the program is corrupt")
        if x.dtype != slot.dtype:
            raise InvalidArgumentError(
                f"method {self.name!r} input {n}: expected dtype {info.dtype().name.lower()} "
                f"({slot.dtype}), got {x.dtype}; convert it first (e.g. x.float())")
        if x.ndim != len(slot.bound):
            raise InvalidArgumentError(
                f"method {self.name!r} input {n}: expected rank {len(slot.bound)} "
                f"(sizes {list(slot.bound)}), got rank {x.ndim} (sizes {list(x.shape)})")
        if tuple(x.shape) != slot.bound:
            if slot.dynamism == S.TensorShapeDynamism.STATIC:
                raise InvalidArgumentError(
                    f"method {self.name!r} input {n}: expected sizes {list(slot.bound)}, "
                    f"got {list(x.shape)}")
            for d, (got, bound) in enumerate(zip(x.shape, slot.bound)):
                if got > bound:
                    raise InvalidArgumentError(
                        f"method {self.name!r} input {n}: dimension {d} is {got}, beyond its "
                        f"upper bound {bound} (sizes must be within {list(slot.bound)}); "
                        "re-export with a larger torch.export.Dim max")
        return x

    def execute(self, inputs: Sequence[Any] = (), *, copy_outputs: bool = True) -> list[Any]:
        """Run the method. NumPy in -> NumPy out; torch tensors in -> torch tensors out.

        Outputs are copies (C-contiguous): the next ``execute`` reuses the planned memory.
        ``copy_outputs=False`` returns the output tensors themselves instead, views of the
        method's planned memory (or of its constants, read-only, or of an input): no copy, but
        the next ``execute`` overwrites them, so consume them before calling again.

        One call at a time: a Method owns its memory, so a call made while another thread is
        inside ``execute`` raises ``MethodBusyError`` (a call made while the compiled kernels'
        warm-up thread rebuilds the method's plans waits for it instead). Load one Method per
        thread (they can share the Program, which is read-only). See docs/reliability.md.
        """
        if type(inputs) is not list and type(inputs) is not tuple:
            self._check_input_sequence(inputs)
        if not self._busy.acquire(blocking=False) and not (
                self._rebuilding and self._busy.acquire()):
            raise MethodBusyError(
                f"method {self.name!r} is already executing in another thread; a Method runs "
                "one call at a time. Load a Method per thread with program.load_method("
                f"{self.name!r}) (the Program can be shared), or guard this one with a lock")
        counted = accel.call_started()  # (the compiled kernels' warm-up pauses meanwhile)
        try:
            # (one argument when copying: tests/reliability wrap _execute(inputs))
            return self._execute(inputs) if copy_outputs else self._execute(inputs, False)
        finally:
            self._busy.release()
            if counted:
                accel.call_ended()

    def _check_input_sequence(self, inputs: Any) -> None:
        """``execute(x)`` for ``execute([x])``: a tensor is a sequence too (of its rows), which
        would fail later with a misleading count or rank error, or run on the first row."""
        if isinstance(inputs, np.ndarray) or is_torch_tensor(inputs) or isinstance(
                inputs, (str, bytes, dict)) or not isinstance(inputs, Sequence):
            raise InvalidArgumentError(
                f"method {self.name!r} takes a list or tuple of inputs, one per input "
                f"({self._n_inputs} here); got a {type(inputs).__module__}."
                f"{type(inputs).__qualname__}: call execute([x]), not execute(x)")

    def _execute(self, inputs: Sequence[Any], copy_outputs: bool = True) -> list[Any]:
        """Run the method. NumPy in -> NumPy out; torch tensors in -> torch tensors out."""
        if self._rerun_when_warm and not accel.pending():
            self._rebuild_for_compiled_kernels()
        want_torch = False
        if not self._set_inputs_fast(inputs):
            want_torch = any(is_torch_tensor(x) for x in inputs)
            self._set_inputs(list(inputs))
        tracer = self.event_tracer
        start = time.perf_counter()
        if tracer is not None:
            self._run_traced(tracer)
        elif self._steps is not None:
            self._quiet.run(run_steps, self._steps[0], self._fail)
        elif not self._has_jumps:
            run_steps(self._instrs, self._fail)  # the reference: every kernel by its closure
        else:
            run_jumps(self.records, self._instrs, self.name, self.max_instructions)
        self.last_run_seconds = time.perf_counter() - start
        vals = self._vals
        if copy_outputs:
            if len(self._outputs) == 1:
                v = vals[self._outputs[0]]
                outs = [v.copy() if type(v) is np.ndarray else v]
            else:
                outs = [v.copy() if type(v) is np.ndarray else v
                        for v in map(vals.__getitem__, self._outputs)]
        else:
            outs = [vals[i] for i in self._outputs]
        if want_torch:
            outs = [to_torch(v) if isinstance(v, np.ndarray) else v for v in outs]
        return outs

    def _failing(self, owner: list[int] | None) -> Callable[[int, Exception], None]:
        """``fail(k, error)`` for ``run_steps``: raise the error of step ``k`` (of instruction
        ``owner[k]``, or ``k`` itself without ``owner``) in that instruction's context."""
        records, name = self.records, self.name

        def fail(k: int, e: Exception) -> None:
            index = k if owner is None else owner[k] if 0 <= k < len(owner) else -1
            _raise_in_context(e, name, records, index)
        return fail

    def _run_traced(self, tracer: Any) -> None:
        """One "Execute" run block: the instructions' events, ``Method::execute`` around
        them, then the program outputs (ExecuTorch logs those on chain -1, instruction 0)."""
        tracer.create_event_block("Execute")
        start = now_ns()
        run_traced(self.records, self._vals, tracer, self.name, budget=self.max_instructions)
        tracer.log_profiling("Method::execute", UNSET_CHAIN_ID, UNSET_DEBUG_HANDLE, start, now_ns())
        for idx in self._plan.outputs:
            tracer.log_evalue(self._vals[idx], output=True, chain_index=UNSET_CHAIN_ID,
                              instruction_id=UNSET_DEBUG_HANDLE)

    def __call__(self, *inputs: Any) -> list[Any]:
        return self.execute(inputs)

    def __str__(self) -> str:
        lines = [str(self._meta)]
        lines += [f"  {r.index:4d}  {r.description}" for r in self.records]
        return "\n".join(lines)


def _destroy_delegates(handles: list[tuple[Any, Any]]) -> None:
    for backend, handle in handles:
        destroy = getattr(backend, "destroy", None)
        if destroy is not None:
            destroy(handle)


_SCALAR_FIELD = {S.Int: "int_val", S.Double: "double_val", S.Bool: "bool_val", S.String: "string_val"}
_BOXED = (S.IntList, S.TensorList, S.OptionalTensorList)
_LIST_ITEMS = {S.IntList: (S.Int,), S.TensorList: (S.Tensor,),
               S.OptionalTensorList: (S.Tensor, S.Null)}
