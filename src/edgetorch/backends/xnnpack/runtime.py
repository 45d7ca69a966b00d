"""The XNNPACK delegate's runtime side: NumPy in place of XNNPACK (no torch).

``init`` parses the blob, loads every constant (from the program's named data, the blob's
constant region, or an old blob's in-flatbuffer buffers) and compiles each node into a
pre-bound callable (``lowering.py``). ``execute`` binds the external inputs, runs the callables
and copies the external outputs into the method's tensors. Input shapes a graph has already
seen run a plan instead (``plan.py``): one generated function over preallocated buffers.

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

from ...errors import (
    EdgeTorchError,
    ErrorCode,
    FormatError,
    InvalidArgumentError,
    InvalidProgramError,
    KernelError,
)
from ...kernels import accel
from ...runtime.event_tracer import now_ns
from . import (
    fusion,
    lowering_nn,  # noqa: F401  (registers the GEMM, convolution and pooling rules)
)
from . import plan as planning
from . import schema as x
from .lowering import Lowered, Step
from .lowering_quant import QCtx, _value_ids, lower_node, plan_clamp_fusion
from .memory_plan import plan_outputs
from .quant_values import QParams, decode_value
from .serialization import XnnpackBlob, deserialize_xnnpack_binary

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
    fusions: dict[int, fusion.Fusion] = field(default_factory=dict)  # node -> its chain
    # Plans by input-shape signature, the last one run, and how often unplanned ones came.
    plans: dict[tuple[tuple[int, ...], ...], planning.Plan] = field(default_factory=dict)
    plan: planning.Plan | None = None
    seen: dict[tuple[tuple[int, ...], ...], int] = field(default_factory=dict)

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
        return compile_blob(deserialize_xnnpack_binary(blob), named_data)

    def execute(self, handle: CompiledGraph, values: list[Any], args: Sequence[int],
                context: Any = None) -> None:
        """Run the delegate. ``context.resize(value_index, sizes)``, when given, re-views an
        output tensor at new (dynamic) sizes and returns it."""
        resize, tracer = getattr(context, "resize", None), getattr(context, "event_tracer", None)
        plan = handle.plan  # the usual call: the plan of the last input shapes, directly
        if plan is not None and tracer is None and planning.PLAN_AFTER and \
                _run_plan(handle, plan, values, args, resize):
            return
        run(handle, values, args, resize, tracer)

    def destroy(self, handle: CompiledGraph) -> None:
        handle.env.clear()
        handle.initial.clear()
        handle.steps.clear()
        handle.nodes.clear()
        handle.plans.clear()
        handle.plan = None


# ---- compiling ----------------------------------------------------------------------------


def compile_blob(blob: XnnpackBlob, named_data: NamedData | None = None) -> CompiledGraph:
    """Load the constants of ``blob`` and turn its nodes into callables."""
    g = blob.graph
    if g.num_externs > MAX_EXTERNS:
        raise FormatError(f"XNNPACK graph declares {g.num_externs} external values; at most "
                          f"{MAX_EXTERNS} are accepted (the blob is likely corrupted)")
    slots: dict[int, int] = {}
    dims: list[tuple[int, ...]] = []
    dtypes: list[np.dtype] = []
    consts: list[np.ndarray | None] = []
    quant: list[QParams | None] = []
    inputs: list[tuple[int, int, np.dtype]] = []
    outputs: list[tuple[int, int]] = []
    nbytes = 0
    for s, value in enumerate(g.xvalues):
        t = value.tensor
        where = f"XNNPACK value {t.id_out}"
        if t.id_out in slots:
            raise FormatError(f"{where} is defined twice; the blob is corrupted")
        slots[t.id_out] = s
        shape = tuple(map(int, t.dims))
        if len(shape) > MAX_DIMS:
            raise FormatError(f"{where} has {len(shape)} dimensions; XNNPACK allows {MAX_DIMS}")
        const, qparams = None, None
        if isinstance(value.xvalue_union, x.XNNQuantizedTensorValue):
            def load(idx: int, what: str, where: str = where) -> memoryview:
                return _constant_bytes(blob, idx, named_data, f"{where} ({what})")
            dtype, const, qparams = decode_value(value, load, where)
            nbytes += 0 if const is None else const.nbytes
        else:
            dtype = _dtype(value, where)
        if (math.prod(shape) or math.prod(d for d in shape if d)) * dtype.itemsize >= \
                MAX_TENSOR_BYTES:
            # (zero-sized dims included: NumPy refuses such shapes even when empty)
            raise FormatError(f"{where}: dims {list(shape)} describe more than "
                              f"{MAX_TENSOR_BYTES} bytes; the blob is corrupted")
        dims.append(shape)
        dtypes.append(dtype)
        quant.append(qparams)
        if t.constant_buffer_idx and qparams is None:
            data = _constant_bytes(blob, t.constant_buffer_idx, named_data, where)
            count = math.prod(shape)
            if len(data) < count * dtype.itemsize:
                raise FormatError(f"{where}: constant {t.constant_buffer_idx} holds {len(data)} "
                                  f"bytes, its dims {list(shape)} need {count * dtype.itemsize}")
            const = np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
            nbytes += const.nbytes
        consts.append(const)
        if t.flags & ~(x.XNN_VALUE_FLAG_EXTERNAL_INPUT | x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT):
            raise FormatError(f"{where} has unsupported flag bits {t.flags:#x}")
        if t.flags:
            if t.external_id >= max(g.num_externs, 1) or const is not None:
                raise FormatError(f"{where}: external id {t.external_id} is not below the "
                                  f"graph's {g.num_externs} externals (or it is a constant)")
            if t.flags & x.XNN_VALUE_FLAG_EXTERNAL_INPUT:
                inputs.append((t.external_id, s, dtype))
            if t.flags & x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT:
                outputs.append((t.external_id, s))
    env: list[Any] = list(consts)
    ctx = QCtx(env, slots, dims, dtypes, consts, quant=quant)
    plan_clamp_fusion(g.xnodes, ctx, {s for _, s, _ in inputs} | {s for _, s in outputs})
    plan_outputs(g.xnodes, ctx, {s for _, s in outputs})  # convolutions' outputs in one arena
    nodes, node_slots, descriptions, node_ids = [], [], [], []
    for k, node in enumerate(g.xnodes):
        kind = type(node.xnode_union).__name__
        desc = f"node {k} {kind} (debug handle {node.debug_handle})"
        ctx.where = f"XNNPACK {desc}"
        nodes.append(lower_node(node, ctx))
        node_slots.append(tuple(slots[v] for v in _value_ids(node.xnode_union) if v in slots))
        descriptions.append(desc)
        node_ids.append((f"{kind} #{k}", int(node.debug_handle)))
    inputs.sort(key=lambda e: e[0])
    outputs.sort()
    externs = [e[0] for e in inputs] + [e[0] for e in outputs]
    if len(set(externs)) != len(externs):
        raise FormatError(f"XNNPACK graph uses an external id twice ({sorted(externs)})")
    external = {s for _, s, _ in inputs} | {s for _, s in outputs}
    return CompiledGraph(env, list(consts), [n.step for n in nodes], descriptions, inputs,
                         outputs, max(externs, default=-1) + 1, nbytes, node_ids, nodes,
                         node_slots, fusion.find(nodes, node_slots, consts, external))


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
    if tracer is None and planning.PLAN_AFTER:
        plan = g.plan
        if plan is not None and _run_plan(g, plan, values, args, resize):
            return
        if _run_planned(g, values, args, resize):
            return
    run_steps(g, values, args, resize, tracer)


def _run_plan(g: CompiledGraph, plan: planning.Plan, values: list[Any], args: Sequence[int],
              resize: Resize | None) -> bool:
    try:
        return plan.fn(values, args, resize)
    except EdgeTorchError:
        raise
    except Exception as e:
        k = plan.failed_node(e)
        where = g.descriptions[k] if k is not None else "graph"
        raise KernelError(f"XNNPACK {where} failed: {type(e).__name__}: {e}") from e


def _run_planned(g: CompiledGraph, values: list[Any], args: Sequence[int],
                 resize: Resize | None) -> bool:
    """Run the plan for these input shapes, building it when they come for the
    ``PLAN_AFTER``-th time; False when the reference path should run the call."""
    ins = _bind_inputs(g, values, args)
    key = tuple(a.shape for a in ins)
    plan = g.plans.get(key)
    if plan is not None:
        g.plan = plan
        return _run_plan(g, plan, values, args, resize)
    if accel.pending():  # compiled kernels warming up: plan (and pick paths) once ready
        return False
    seen = g.seen.get(key, 0) + 1
    if seen < planning.PLAN_AFTER or len(g.plans) >= planning.MAX_PLANS:
        if len(g.seen) >= 4 * planning.MAX_PLANS:
            g.seen.clear()
        g.seen[key] = seen
        return False
    g.seen.pop(key, None)
    g.plans[key] = g.plan = planning.build(g, ins, values, args, resize)
    return True


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
    """The reference path: each node's step on the environment."""
    env = g.env
    for (_, slot, _), a in zip(g.inputs, _bind_inputs(g, values, args)):
        env[slot] = a
    k = 0
    token = planning.quiet()  # XNNPACK computes inf and nan without complaint: NumPy's
    try:  # warnings are off for the whole graph (once per call, not once per node)
        if tracer is None:
            for k, step in enumerate(g.steps):  # noqa: B007 (k names the failing node)
                step()
        else:  # one event per node, named "<XNode kind> #k", keyed by its debug handle
            log_values = tracer.log_intermediate_outputs and tracer.delegate_intermediate_outputs
            for k, step in enumerate(g.steps):  # noqa: B007
                name, handle = g.node_ids[k]
                start = now_ns()
                step()
                tracer.log_profiling_delegate(None, name, start, now_ns(), None, handle)
                if log_values:  # the node's output as computed (int8 values, physical layout)
                    tracer.log_intermediate_output_delegate(None, name, env[g.nodes[k].out])
    except EdgeTorchError:
        raise
    except Exception as e:
        raise KernelError(f"XNNPACK {g.descriptions[k]} failed: {type(e).__name__}: {e}") from e
    finally:
        planning.loud(token)
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
