"""The XNNPACK delegate's runtime side: NumPy in place of XNNPACK (no torch).

``init`` parses the blob, loads every constant (from the program's named data, the blob's
constant region, or an old blob's in-flatbuffer buffers) and compiles each node into a
pre-bound callable (``lowering.py``). ``execute`` binds the external inputs, runs the callables
and copies the external outputs into the method's tensors.

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
from ...runtime.event_tracer import now_ns
from . import lowering_nn  # noqa: F401  (registers the GEMM, convolution and pooling rules)
from . import schema as x
from .lowering import Step
from .lowering_quant import QCtx, lower_node, plan_clamp_fusion
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

    def __str__(self) -> str:
        lines = [f"XNNPACK graph: {len(self.steps)} nodes, inputs (arg, value) "
                 f"{[(e, s) for e, s, _ in self.inputs]}, outputs {self.outputs}, "
                 f"{self.nbytes_constants} bytes of constants"]
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
        run(handle, values, args, getattr(context, "resize", None),
            getattr(context, "event_tracer", None))

    def destroy(self, handle: CompiledGraph) -> None:
        handle.env.clear()
        handle.initial.clear()
        handle.steps.clear()


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
        shape = tuple(int(d) for d in t.dims)
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
        if math.prod(d for d in shape if d) * dtype.itemsize >= MAX_TENSOR_BYTES:
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
    steps, descriptions, node_ids = [], [], []
    for k, node in enumerate(g.xnodes):
        kind = type(node.xnode_union).__name__
        desc = f"node {k} {kind} (debug handle {node.debug_handle})"
        ctx.where = f"XNNPACK {desc}"
        steps.append(lower_node(node, ctx))
        descriptions.append(desc)
        node_ids.append((f"{kind} #{k}", int(node.debug_handle)))
    inputs.sort(key=lambda e: e[0])
    outputs.sort()
    externs = [e[0] for e in inputs] + [e[0] for e in outputs]
    if len(set(externs)) != len(externs):
        raise FormatError(f"XNNPACK graph uses an external id twice ({sorted(externs)})")
    return CompiledGraph(env, list(consts), steps, descriptions, inputs, outputs,
                         max(externs, default=-1) + 1, nbytes, node_ids)


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
    env = g.env
    for ext, slot, dtype in g.inputs:
        a = values[args[ext]]
        if type(a) is not np.ndarray or a.dtype != dtype:
            if not isinstance(a, np.ndarray) or a.dtype != dtype:
                got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
                raise InvalidArgumentError(
                    f"XNNPACK delegate argument {ext} (value {args[ext]}) must be a {dtype} "
                    f"tensor, got {got}")
        env[slot] = a if a.flags.c_contiguous else _physical(a)
    k = 0
    try:
        # XNNPACK computes inf and nan without complaint: NumPy's warnings are off for the
        # whole graph (one errstate per call, not one per node)
        with np.errstate(all="ignore"):
            if tracer is None:
                for k, step in enumerate(g.steps):  # noqa: B007 (k names the failing node)
                    step()
            else:  # one event per node, named "<XNode kind> #k", keyed by its debug handle
                for k, step in enumerate(g.steps):  # noqa: B007
                    name, handle = g.node_ids[k]
                    start = now_ns()
                    step()
                    tracer.log_profiling_delegate(None, name, start, now_ns(), None, handle)
    except EdgeTorchError:
        raise
    except Exception as e:
        raise KernelError(f"XNNPACK {g.descriptions[k]} failed: {type(e).__name__}: {e}") from e
    for ext, slot in g.outputs:
        out, res = values[args[ext]], env[slot]
        if (type(out) is np.ndarray and type(res) is np.ndarray and out.shape == res.shape
                and out.dtype == res.dtype and out.flags.c_contiguous):
            np.copyto(out, res)  # the usual case, without _store's checks
        else:
            _store(out, res, ext, args[ext], resize)
    env[:] = g.initial  # drop intermediates; constants stay


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
