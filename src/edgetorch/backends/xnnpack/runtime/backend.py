"""The XNNPACK delegate's runtime side: NumPy in place of XNNPACK (no torch).

``init`` parses the blob, loads every constant (from the program's named data, the blob's
constant region, or an old blob's in-flatbuffer buffers) and compiles each node into a
pre-bound callable (``nodes.py``). ``execute`` binds the external inputs, runs the callables
and copies the external outputs into the method's tensors. The declared input shapes (built
at load) and shapes a graph has already seen run a plan instead (``plan.py``): one generated
function over preallocated buffers.

How a delegate call's arguments map to the graph (``XNNExecutor.cpp``): a value flagged
``XNN_VALUE_FLAG_EXTERNAL_INPUT``/``_OUTPUT`` with ``external_id = k`` is the call's argument
``k``; ExecuTorch's preprocess numbers the delegated graph's user inputs first, then its
outputs, so a call passes ``[inputs..., outputs...]``. Tensors cross the boundary in their
physical order (sizes permuted by dim order), which is what XNNPACK computes in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....errors import (
    EdgeTorchError,
    ErrorCode,
    FormatError,
    InvalidArgumentError,
    InvalidProgramError,
    KernelError,
)
from ....kernels import accel
from ....runtime.instructions import run_steps as run_loop
from ....runtime.optimize import Options, Pass, PassResult
from ....runtime.quiet import Quiet
from .. import schema as x
from ..serialization import XnnpackBlob, deserialize_xnnpack_binary
from . import (
    fusions,
    nodes_nn,  # noqa: F401  (registers the GEMM, convolution and pooling rules)
)
from . import plan as planning
from .arena import plan_outputs
from .nodes import Lowered, Step
from .nodes_quant import QCtx, _value_ids, fold_clamps, lower_node
from .passes import ARENA, FOLD_CLAMPS, FUSE_CHAINS, PLAN, options_of
from .quant_values import QParams, decode_value

NamedData = Callable[[str], Any]  # key -> bytes-like, raising when the key is missing

_DTYPES: dict[x.XNNDatatype, np.dtype] = {
    x.XNNDatatype.xnn_datatype_fp32: np.dtype(np.float32),
    x.XNNDatatype.xnn_datatype_fp16: np.dtype(np.float16),
    x.XNNDatatype.xnn_datatype_int32: np.dtype(np.int32),
}
try:  # optional, as in the portable kernels
    import ml_dtypes as _ml

    _DTYPES[x.XNNDatatype.xnn_datatype_bf16] = np.dtype(_ml.bfloat16)
except ImportError:  # pragma: no cover - the minimal runtime environment
    pass

MAX_DIMS = 6  # XNN_MAX_TENSOR_DIMS
MAX_EXTERNS = 4096  # what ExecuTorch's XNNCompiler accepts
MAX_TENSOR_BYTES = 1 << 48  # far beyond any real tensor, within what NumPy can describe


@dataclass
class CompiledGraph:
    """A delegate ready to run: the handle ``XnnpackBackend.init`` returns."""

    env: list[Any]  # value slot -> array while running
    initial: list[Any]  # constants in their slots, None elsewhere
    steps: list[Step]
    descriptions: list[str]
    inputs: list[tuple[int, int, np.dtype]]  # (external id, slot, dtype), by external id
    outputs: list[tuple[int, int]]  # (external id, slot), by external id
    num_args: int
    nbytes_constants: int = 0
    # Per node: (name, debug handle of the Edge node it came from) for the event tracer.
    node_ids: list[tuple[str, int]] = field(default_factory=list)
    nodes: list[Lowered] = field(default_factory=list)  # what plan.py compiles
    node_slots: list[tuple[int, ...]] = field(default_factory=list)  # value slots per node
    fusions: dict[int, fusions.Fusion] = field(default_factory=dict)  # node -> its chain
    # Plans by input-shape signature, the last one run, and how often unplanned ones came;
    # a plan is built at the plan_after-th call of a shape (0: no plans, the pass is off).
    plans: dict[tuple[tuple[int, ...], ...], planning.Plan] = field(default_factory=dict)
    plan: planning.Plan | None = None
    seen: dict[tuple[tuple[int, ...], ...], int] = field(default_factory=dict)
    plan_after: int = 0
    # Plans built while the compiled kernels warm up (accel.pending) take the NumPy paths:
    # they are built again at the first call after the warm-up.
    warming: bool = False
    options: Options | None = None  # the load's passes (their guard, when a plan is built)
    dims: list[tuple[int, ...]] = field(default_factory=list)  # value slot -> declared dims
    dtypes: list[np.dtype] = field(default_factory=list)  # value slot -> dtype
    quiet: Quiet = field(default_factory=Quiet)  # NumPy's warnings off while it runs

    def __str__(self) -> str:
        lines = [f"XNNPACK graph: {len(self.steps)} nodes, inputs (arg, value) "
                 f"{[(e, s) for e, s, _ in self.inputs]}, outputs {self.outputs}, "
                 f"{self.nbytes_constants} bytes of constants, {len(self.plans)} plan(s)"]
        lines += [f"  {k:4d}  {d}" for k, d in enumerate(self.descriptions)]
        return "\n".join(lines)


class XnnpackBackend:
    """Runs ExecuTorch XNNPACK delegate blobs (``"XnnpackBackend"``) with NumPy.

    ``init(blob, compile_specs, context)``: ``context.named_data(key)`` returns the program's
    named data (the weights ExecuTorch 1.5 stores outside the blob); without a context only
    blobs that carry their constants themselves load.
    """

    def is_available(self) -> bool:
        return True

    def init(self, blob: Any, compile_specs: dict[str, bytes] | None = None,
             context: Any = None) -> CompiledGraph:
        named_data = getattr(context, "named_data", None) if context is not None else None
        return compile_blob(deserialize_xnnpack_binary(blob), named_data, options_of(context),
                            plan_at_load=getattr(context, "static_shapes", False))

    def execute(self, handle: CompiledGraph, values: list[Any], args: Sequence[int],
                context: Any = None) -> None:
        """Run the delegate. ``context.resize(value_index, sizes)``, when given, re-views an
        output tensor at new (dynamic) sizes and returns it."""
        resize, tracer = getattr(context, "resize", None), getattr(context, "event_tracer", None)
        plan = handle.plan  # the usual call: the plan of the last input shapes, directly
        if plan is not None and tracer is None and not handle.warming and \
                _run_plan(handle, plan, values, args, resize):
            return
        run(handle, values, args, resize, tracer)

    def after_warm_up(self, handle: CompiledGraph) -> None:
        """The compiled kernels are ready (``kernels.accel``): the plans built meanwhile with
        the NumPy paths are built again, the declared input shapes' now (the caller holds
        the method between calls), other shapes' at their next call."""
        if handle.warming and not accel.pending():
            declared = tuple(handle.dims[s] for _, s, _ in handle.inputs)
            planned = declared in handle.plans
            _replan(handle)
            if planned:
                _plan_at_load(handle)

    def destroy(self, handle: CompiledGraph) -> None:
        handle.env.clear()
        handle.initial.clear()
        handle.steps.clear()
        handle.nodes.clear()
        handle.plans.clear()
        handle.plan = None


# ---- compiling ----------------------------------------------------------------------------


def compile_blob(blob: XnnpackBlob, named_data: NamedData | None = None,
                 opts: Options | None = None, plan_at_load: bool = True) -> CompiledGraph:
    """Load the constants of ``blob`` and turn its nodes into callables; ``opts``: the load
    passes that run (every one, failures raising, when None); ``plan_at_load``: the plan for
    the declared input shapes is built now, for a graph of at most
    ``plan.PLAN_AT_LOAD_MAX_BYTES`` of weights (False: the method's sizes are dynamic, and the
    declared ones their upper bounds: each shape is planned at its second call)."""
    opts = opts if opts is not None else options_of(None)
    g = blob.graph
    if g.num_externs > MAX_EXTERNS:
        raise FormatError(f"XNNPACK graph declares {g.num_externs} external values; at most "
                          f"{MAX_EXTERNS} are accepted (the blob is likely corrupted)")
    v = _load_values(blob, named_data)
    env: list[Any] = list(v.consts)
    ctx = QCtx(env, v.slots, v.dims, v.dtypes, v.consts, quant=v.quant)
    io = {s for _, s, _ in v.inputs} | {s for _, s in v.outputs}
    where = f"(XNNPACK delegate of {len(g.xnodes)} nodes)"
    if _enabled(opts, FOLD_CLAMPS, where):
        folded = opts.guard(FOLD_CLAMPS, fold_clamps, g.xnodes, ctx, io, where=where)
        if folded is not None:
            ctx.fused, ctx.folded = folded
            _ran(opts, FOLD_CLAMPS, len(ctx.folded), where)
    if _enabled(opts, ARENA, where):  # convolutions' outputs in one arena
        planned = opts.guard(ARENA, plan_outputs, g.xnodes, ctx, {s for _, s in v.outputs},
                             where=where)
        if planned is not None:
            ctx.out_plan = planned
            _ran(opts, ARENA, len(planned), where)
    nodes, node_slots, descriptions, node_ids = [], [], [], []
    for k, node in enumerate(g.xnodes):
        kind = type(node.xnode_union).__name__
        desc = f"node {k} {kind} (debug handle {node.debug_handle})"
        ctx.where = f"XNNPACK {desc}"
        nodes.append(lower_node(node, ctx))
        node_slots.append(tuple(v.slots[i] for i in _value_ids(node.xnode_union)
                                if i in v.slots))
        descriptions.append(desc)
        node_ids.append((f"{kind} #{k}", int(node.debug_handle)))
    v.inputs.sort(key=lambda e: e[0])
    v.outputs.sort()
    externs = [e[0] for e in v.inputs] + [e[0] for e in v.outputs]
    if len(set(externs)) != len(externs):
        raise FormatError(f"XNNPACK graph uses an external id twice ({sorted(externs)})")
    graph = CompiledGraph(env, list(v.consts), [n.step for n in nodes], descriptions,
                          v.inputs, v.outputs, max(externs, default=-1) + 1, v.nbytes, node_ids,
                          nodes, node_slots, options=opts, dims=v.dims, dtypes=v.dtypes)
    if _enabled(opts, PLAN, where):  # (every node runs in the plans)
        graph.plan_after = planning.PLAN_AFTER
    if _enabled(opts, FUSE_CHAINS, where) and graph.plan_after:  # (they run in plans)
        found = opts.guard(FUSE_CHAINS, fusions.find, nodes, node_slots, v.consts, io,
                           where=where)
        if found is not None:
            graph.fusions = found
            _ran(opts, FUSE_CHAINS, len(found), where)
    if graph.plan_after:
        if plan_at_load and v.nbytes <= planning.PLAN_AT_LOAD_MAX_BYTES \
                and _value_bytes(graph) <= planning.PLAN_AT_LOAD_MAX_VALUE_BYTES:
            _plan_at_load(graph)
        _ran(opts, PLAN, len(nodes), where)
    return graph


def _value_bytes(g: CompiledGraph) -> int:
    """An upper bound of the bytes the graph's values take at their declared sizes (8 per
    element): a file's sizes are not allocated at load beyond a bound (a corrupt dimension
    would ask for gigabytes there; a call reports it as a typed error instead)."""
    dims = g.dims.values() if isinstance(g.dims, dict) else g.dims
    return sum(8 * math.prod(int(x) for x in d) for d in dims if d is not None)


def _plan_at_load(g: CompiledGraph) -> None:
    """The plan for the graph's declared input shapes (the shapes of a static graph, the upper
    bounds of a dynamic one), built now by a call on zeros into scratch outputs, so the
    method's first call runs it as later ones do. Its buffers are allocated and written
    here. A plan is keyed by shapes, never by values: zeros build the one any call would."""
    if not g.plan_after:
        return
    dims, dtypes = g.dims, g.dtypes
    values: list[Any] = [None] * g.num_args
    for ext, s, dtype in g.inputs:
        values[ext] = np.zeros(dims[s], dtype)
    for ext, s in g.outputs:
        values[ext] = np.zeros(dims[s], dtypes[s])
    ins = [values[ext] for ext, _, _ in g.inputs]
    opts = g.options if g.options is not None else options_of(None)
    try:
        built = opts.guard(PLAN, planning.build, g, ins, values, list(range(g.num_args)), None,
                           where=f"(XNNPACK delegate, inputs {[a.shape for a in ins]}, at load)")
    except EdgeTorchError:  # the graph refuses zeros (its calls will say why, in context)
        built = None
    finally:
        g.env[:] = g.initial  # (the zeros and their intermediates are not kept)
    if built is None:
        return
    key = tuple(a.shape for a in ins)
    g.seen.pop(key, None)
    g.plans[key] = g.plan = built
    g.warming = g.warming or accel.pending()


def _enabled(opts: Options, p: Pass, where: str) -> bool:
    if p.name in opts:
        return True
    opts.report.add(PassResult(p.name, "off", where=where))
    return False


def _ran(opts: Options, p: Pass, changed: int, where: str) -> None:
    opts.report.add(PassResult(p.name, "ran", changed, where=where))


@dataclass
class _Values:
    """A graph's values as loaded: slot by value id, dims, dtypes, constants, quantization,
    the external inputs (external id, slot, dtype) and outputs (external id, slot)."""

    slots: dict[int, int] = field(default_factory=dict)
    dims: list[tuple[int, ...]] = field(default_factory=list)
    dtypes: list[np.dtype] = field(default_factory=list)
    consts: list[np.ndarray | None] = field(default_factory=list)
    quant: list[QParams | None] = field(default_factory=list)
    inputs: list[tuple[int, int, np.dtype]] = field(default_factory=list)
    outputs: list[tuple[int, int]] = field(default_factory=list)
    nbytes: int = 0


def _load_values(blob: XnnpackBlob, named_data: NamedData | None) -> _Values:
    g = blob.graph
    v = _Values()
    for s, value in enumerate(g.xvalues):
        t = value.tensor
        where = f"XNNPACK value {t.id_out}"
        if t.id_out in v.slots:
            raise FormatError(f"{where} is defined twice; the blob is corrupted")
        v.slots[t.id_out] = s
        shape = tuple(map(int, t.dims))
        if len(shape) > MAX_DIMS:
            raise FormatError(f"{where} has {len(shape)} dimensions; XNNPACK allows {MAX_DIMS}")
        const, qparams = None, None
        if isinstance(value.xvalue_union, x.XNNQuantizedTensorValue):
            def load(idx: int, what: str, where: str = where) -> memoryview:
                return _constant_bytes(blob, idx, named_data, f"{where} ({what})")
            dtype, const, qparams = decode_value(value, load, where)
            v.nbytes += 0 if const is None else const.nbytes
        else:
            dtype = _dtype(value, where)
        if (math.prod(shape) or math.prod(d for d in shape if d)) * dtype.itemsize >= \
                MAX_TENSOR_BYTES:
            # (zero-sized dims included: NumPy refuses such shapes even when empty)
            raise FormatError(f"{where}: dims {list(shape)} describe more than "
                              f"{MAX_TENSOR_BYTES} bytes; the blob is corrupted")
        v.dims.append(shape)
        v.dtypes.append(dtype)
        v.quant.append(qparams)
        if t.constant_buffer_idx and qparams is None:
            data = _constant_bytes(blob, t.constant_buffer_idx, named_data, where)
            count = math.prod(shape)
            if len(data) < count * dtype.itemsize:
                raise FormatError(f"{where}: constant {t.constant_buffer_idx} holds {len(data)} "
                                  f"bytes, its dims {list(shape)} need {count * dtype.itemsize}")
            const = np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
            v.nbytes += const.nbytes
        v.consts.append(const)
        if t.flags & ~(x.XNN_VALUE_FLAG_EXTERNAL_INPUT | x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT):
            raise FormatError(f"{where} has unsupported flag bits {t.flags:#x}")
        if t.flags:
            if t.external_id >= max(g.num_externs, 1) or const is not None:
                raise FormatError(f"{where}: external id {t.external_id} is not below the "
                                  f"graph's {g.num_externs} externals (or it is a constant)")
            if t.flags & x.XNN_VALUE_FLAG_EXTERNAL_INPUT:
                v.inputs.append((t.external_id, s, dtype))
            if t.flags & x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT:
                v.outputs.append((t.external_id, s))
    return v


def _dtype(value: x.XValue, where: str) -> np.dtype:
    t = value.tensor
    if t.dq_datatype != x.XNNDatatype.xnn_datatype_invalid:
        raise InvalidProgramError(
            f"{where}: the legacy dq_datatype encoding of dynamic quantization "
            f"({t.dq_datatype.name}) is not supported; re-export with ExecuTorch 1.5 "
            "(XNNQuantizedTensorValue with PerTokenDynamicQuant)", code=ErrorCode.NotImplemented)
    dtype = _DTYPES.get(t.datatype)
    if dtype is None:
        raise InvalidProgramError(
            f"{where}: datatype {t.datatype.name} is not supported (supported: "
            f"{', '.join(d.name for d in _DTYPES)})", code=ErrorCode.NotImplemented)
    return dtype


def _constant_bytes(blob: XnnpackBlob, idx: int, named_data: NamedData | None,
                    where: str) -> memoryview:
    g = blob.graph
    if blob.header is None:  # an old blob: constants inside the flatbuffer
        buffers = g.constant_buffer or []
        if idx >= len(buffers):
            raise FormatError(f"{where}: constant buffer {idx} is out of range (the graph has "
                              f"{len(buffers)})")
        return memoryview(buffers[idx])
    if idx >= len(g.constant_data):
        raise FormatError(f"{where}: constant {idx} is out of range (the graph has "
                          f"{len(g.constant_data)})")
    entry = g.constant_data[idx]
    if entry.named_key is None:
        region = blob.constant_data
        if entry.offset > len(region) or entry.size > len(region) - entry.offset:
            raise FormatError(f"{where}: constant [{entry.offset}, +{entry.size}) lies outside "
                              f"the blob's {len(region)}-byte constant data")
        return region[entry.offset : entry.offset + entry.size]
    if named_data is None:
        raise InvalidProgramError(
            f"{where}: its data is the program's named data {entry.named_key!r}, but the "
            "runtime gave the XNNPACK backend no named-data access (init context); load the "
            "program with a runtime that passes it", code=ErrorCode.NotFound)
    try:
        return memoryview(named_data(entry.named_key)).cast("B")
    except (EdgeTorchError, KeyError) as e:
        raise InvalidProgramError(f"{where}: named data {entry.named_key!r} is missing: {e}",
                                  code=ErrorCode.NotFound) from e


# ---- running --------------------------------------------------------------------------


def _memory_order(a: np.ndarray) -> list[int] | None:
    """The dim order of ``a`` from its strides; None for the default (contiguous) order."""
    if a.ndim < 2 or a.flags.c_contiguous:
        return None
    return sorted(range(a.ndim), key=lambda d: -a.strides[d])


def _physical(a: np.ndarray) -> np.ndarray:
    """``a`` with its dimensions in memory order (a channels-last NCHW tensor -> NHWC)."""
    order = _memory_order(a)
    return a if order is None else a.transpose(order)


Resize = Callable[[int, tuple[int, ...]], np.ndarray]


def run(g: CompiledGraph, values: list[Any], args: Sequence[int],
        resize: Resize | None = None, tracer: Any = None) -> None:
    if len(args) < g.num_args:
        raise InvalidArgumentError(
            f"XNNPACK delegate takes {g.num_args} arguments (inputs, then outputs), the call "
            f"passes {len(args)}")
    if tracer is None and g.plan_after:
        if g.warming and not accel.pending():
            _replan(g)
        plan = g.plan
        if plan is not None and _run_plan(g, plan, values, args, resize):
            return
        if _run_planned(g, values, args, resize):
            return
    run_steps(g, values, args, resize, tracer)


def _run_plan(g: CompiledGraph, plan: planning.Plan, values: list[Any], args: Sequence[int],
              resize: Resize | None) -> bool:
    try:
        return g.quiet.run(plan.fn, values, args, resize)
    except EdgeTorchError:
        raise
    except Exception as e:
        k = plan.failed_node(e)
        where = g.descriptions[k] if k is not None else "graph"
        raise KernelError(f"XNNPACK {where} failed: {type(e).__name__}: {e}") from e


def _run_planned(g: CompiledGraph, values: list[Any], args: Sequence[int],
                 resize: Resize | None) -> bool:
    """Run the plan for these input shapes, building it when they come for the
    ``plan_after``-th time; False when the reference path should run the call."""
    ins = _bind_inputs(g, values, args)
    key = tuple(a.shape for a in ins)
    plan = g.plans.get(key)
    if plan is not None:
        g.plan = plan
        return _run_plan(g, plan, values, args, resize)
    seen = g.seen.get(key, 0) + 1
    if seen < g.plan_after or len(g.plans) >= planning.MAX_PLANS:
        if len(g.seen) >= 4 * planning.MAX_PLANS:
            g.seen.clear()
        g.seen[key] = seen
        return False
    g.seen.pop(key, None)
    opts = g.options if g.options is not None else options_of(None)
    built = opts.guard(PLAN, planning.build, g, ins, values, args, resize,
                       where=f"(XNNPACK delegate, inputs {list(key)})")
    if built is None:  # the plan failed (reported): this graph runs the reference path
        g.plan_after = 0
        return False
    g.plans[key] = g.plan = built
    g.warming = g.warming or accel.pending()
    return True


def _replan(g: CompiledGraph) -> None:
    """The compiled kernels are ready: the plans built meanwhile (NumPy paths) go, and each
    of their input shapes is planned again at its next call."""
    for key in g.plans:
        g.seen[key] = g.plan_after - 1
    g.plans.clear()
    g.plan = None
    g.warming = False


def _bind_inputs(g: CompiledGraph, values: list[Any], args: Sequence[int]) -> list[np.ndarray]:
    """The external inputs in XNNPACK's (physical) order, checked."""
    ins = []
    for ext, _, dtype in g.inputs:
        a = values[args[ext]]
        if type(a) is not np.ndarray or a.dtype != dtype:
            if not isinstance(a, np.ndarray) or a.dtype != dtype:
                got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
                raise InvalidArgumentError(
                    f"XNNPACK delegate argument {ext} (value {args[ext]}) must be a {dtype} "
                    f"tensor, got {got}")
        ins.append(a if a.flags.c_contiguous else _physical(a))
    return ins


def run_steps(g: CompiledGraph, values: list[Any], args: Sequence[int],
              resize: Resize | None = None, tracer: Any = None) -> None:
    """The reference path: each node's step on the environment, NumPy's warnings off (as
    XNNPACK computes inf and nan without complaint); with a tracer, one event per node,
    named "<XNode kind> #k" and keyed by its debug handle."""
    env = g.env
    for (_, slot, _), a in zip(g.inputs, _bind_inputs(g, values, args)):
        env[slot] = a

    def fail(k: int, e: Exception) -> None:
        if isinstance(e, EdgeTorchError):
            raise e
        raise KernelError(f"XNNPACK {g.descriptions[k]} failed: {type(e).__name__}: {e}") from e

    each = None
    if tracer is not None:  # one event per node, named "<XNode kind> #k", keyed by its handle
        log_values = tracer.log_intermediate_outputs and tracer.delegate_intermediate_outputs

        def each(k: int, start: int, end: int) -> None:
            name, handle = g.node_ids[k]
            tracer.log_profiling_delegate(None, name, start, end, None, handle)
            if log_values:  # the node's output as computed (int8 values, physical layout)
                tracer.log_intermediate_output_delegate(None, name, env[g.nodes[k].out])
    g.quiet.run(run_loop, g.steps, fail, each)
    _write_outputs(g, [env[slot] for _, slot in g.outputs], values, args, resize)
    env[:] = g.initial  # drop intermediates; constants stay


def _write_outputs(g: CompiledGraph, results: list[Any], values: list[Any],
                   args: Sequence[int], resize: Resize | None) -> None:
    for (ext, _), res in zip(g.outputs, results):
        out = values[args[ext]]
        if (type(out) is np.ndarray and type(res) is np.ndarray and out.shape == res.shape
                and out.dtype == res.dtype and out.flags.c_contiguous):
            np.copyto(out, res)  # the usual case, without _store's checks
        else:
            _store(out, res, ext, args[ext], resize)


def _store(out: Any, res: np.ndarray | None, ext: int, index: int,
           resize: Resize | None) -> None:
    if not isinstance(out, np.ndarray):
        raise InvalidArgumentError(f"XNNPACK delegate argument {ext} (value {index}) must be "
                                   f"an output tensor, got {type(out).__name__}")
    if res is None:
        raise KernelError(f"XNNPACK delegate output {ext} (value {index}) is never computed: "
                          "no node of the graph writes it")
    order = _memory_order(out)
    target = out.transpose(order) if order else out
    if target.shape != res.shape:
        if _squeezed(target.shape) == _squeezed(res.shape) and target.size == res.size:
            res = res.reshape(target.shape)  # e.g. a 0-d tensor that XNNPACK sees as [1]
        elif resize is not None and len(res.shape) == out.ndim:
            # XNNExecutor::resize_outputs: logical size of dim order[j] is XNNPACK's dim j.
            sizes = [0] * out.ndim
            for j, d in enumerate(order or range(out.ndim)):
                sizes[d] = res.shape[j]
            out = resize(index, tuple(sizes))
            target = out.transpose(order) if order else out
        else:
            raise KernelError(
                f"XNNPACK delegate output {ext} (value {index}) has sizes {list(res.shape)}, "
                f"the method planned {list(target.shape)}; resizing outputs needs a runtime "
                "that passes an execution context with resize()")
    np.copyto(target, res, casting="unsafe")


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)
