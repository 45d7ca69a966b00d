"""The Vulkan delegate on a PC: a NumPy interpreter of ExecuTorch's ``VkGraph``.

``VulkanBackend`` (registered under ``"VulkanBackend"``) reads the blob ExecuTorch 1.5.1 (or
edgetorch) wrote, takes the constants from the program's named data (or the blob's own
bytes), resolves every operator call to its handler at load (``ops.resolve``: an operator
it cannot run is refused then, by name), and runs the chain in order on NumPy arrays.

Precision follows the delegate's tensors: float32 tensors compute in float32; when the
delegate keeps float tensors as float16 (``force_fp16``), each operator reads float16 values,
computes in float32 and rounds its result to float16, which is where ExecuTorch's fp16
textures round (the GPU's own fp16 arithmetic inside a shader may round more often: results
agree within fp16 tolerance, not bit for bit). Inputs and outputs are converted between
the program's tensors and the delegate's (int64 <-> int32 when 64-bit types are downcast,
float32 <-> float16). ``handle.operators_run`` counts what ran; ``handle.report()`` says it.

State lives in the delegate as it does on the GPU: ``et_vk.prepack`` calls run once, at load
(ExecuTorch's ``ComputeGraph::prepack``), not per call, and a mutable buffer the delegate took
over (``alias_buffer_mutations``: the buffer's new value is written into its prepacked value)
keeps what the last ``execute`` wrote until the delegate is destroyed. Values computed per call
start empty every call.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....errors import FormatError, InvalidArgumentError, KernelError
from ....runtime.backends import BackendExecutionContext, BackendInitContext
from ....runtime.event_tracer import (
    event_tracer_end_profiling_delegate,
    event_tracer_start_profiling_delegate,
)
from ..serialization import vulkan_graph_schema as vk
from ..serialization.vulkan_graph_serialize import deserialize_vulkan_graph
from . import ops

BACKEND_ID = "VulkanBackend"
PREPACK = "et_vk.prepack.default"

DTYPES: dict[vk.VkDataType, np.dtype] = {
    vk.VkDataType.BOOL: np.dtype(np.bool_), vk.VkDataType.UINT8: np.dtype(np.uint8),
    vk.VkDataType.INT8: np.dtype(np.int8), vk.VkDataType.INT32: np.dtype(np.int32),
    vk.VkDataType.FLOAT16: np.dtype(np.float16), vk.VkDataType.FLOAT32: np.dtype(np.float32),
    vk.VkDataType.FLOAT64: np.dtype(np.float64), vk.VkDataType.INT64: np.dtype(np.int64),
}
_F16 = np.dtype(np.float16)


def _dtype(t: vk.VkTensor, what: str) -> np.dtype:
    dt = DTYPES.get(t.datatype)
    if dt is None:
        raise FormatError(f"VulkanBackend: {what} has datatype {t.datatype!r}, which is not a "
                          "tensor dtype. Re-export the model.")
    return dt


@dataclass
class _Call:
    name: str
    node_id: int
    fn: Any
    args: list[int]  # value ids of the arguments
    out: int  # value id of the output (a tensor, a scalar, or a ValueList of them)
    outs: list[int]  # the output tensors' value ids


@dataclass
class VulkanDelegate:
    """A loaded delegate: the graph, its values (constants, scalars and prepacked tensors
    filled in), the calls each ``execute`` runs, the prepack calls that ran at load, and the
    ids of the values an ``execute`` writes back into ``values`` (mutable state)."""

    graph: vk.VkGraph
    values: list[Any]
    calls: list[_Call]
    fp16: bool
    prepacks: list[_Call] = field(default_factory=list)
    state_ids: list[int] = field(default_factory=list)
    operators_run: Counter = field(default_factory=Counter)

    def report(self) -> str:
        ran = ", ".join(f"{n} x{c}" for n, c in sorted(self.operators_run.items()))
        precision = "float16 storage, float32 arithmetic" if self.fp16 else "float32"
        state = f", {len(self.state_ids)} mutable state tensors" if self.state_ids else ""
        return (f"VulkanBackend (NumPy interpreter, {precision}): {len(self.prepacks)} prepack "
                f"and {len(self.calls)} operator calls, {len(self.graph.values)} values{state}; "
                f"ran {ran or 'nothing yet'}")


class VulkanBackend:
    """The runtime half of ExecuTorch's Vulkan delegate, on the CPU with NumPy."""

    def is_available(self) -> bool:
        return True

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext | None = None) -> VulkanDelegate:
        parsed = deserialize_vulkan_graph(blob)
        graph = parsed.graph
        values: list[Any] = [None] * len(graph.values)
        fp16 = False
        for i, v in enumerate(graph.values):
            values[i] = self._initial(i, v.value, graph, parsed.raw_bytes, context)
            if isinstance(v.value, vk.VkTensor) and v.value.datatype == vk.VkDataType.FLOAT16:
                fp16 = True
        n = len(graph.values)
        calls = []
        for c in graph.chain:
            if not c.args or any(not 0 <= a < n for a in c.args):
                raise FormatError(f"VulkanBackend: operator call {c.name!r} refers to values "
                                  f"outside the graph's {n}. Re-export the model.")
            out = c.args[-1]
            calls.append(_Call(c.name, c.node_id, ops.resolve(c.name), list(c.args[:-1]), out,
                               self._tensor_ids(graph, out)))
        for i in (*graph.input_ids, *graph.output_ids):
            if not 0 <= i < n:
                raise FormatError(f"VulkanBackend: graph input/output id {i} is outside the "
                                  f"graph's {n} values. Re-export the model.")
        handle = VulkanDelegate(graph, values, [c for c in calls if c.name != PREPACK], fp16,
                                [c for c in calls if c.name == PREPACK])
        for call in handle.prepacks:
            self._run(handle, call, handle.values)
            handle.operators_run[call.name] += 1
        handle.state_ids = self._state_ids(handle)
        return handle

    @staticmethod
    def _state_ids(handle: VulkanDelegate) -> list[int]:
        """The values an ``execute`` writes that outlive it: prepacked tensors (an aliased
        mutable buffer). Writing into a constant itself is refused: the GPU cannot either."""
        prepacked = {vid for c in handle.prepacks for vid in c.outs}
        state = []
        for call in handle.calls:
            for vid in call.outs:
                t = handle.graph.values[vid].value
                if isinstance(t, vk.VkTensor) and t.constant_id >= 0:
                    raise FormatError(f"VulkanBackend: operator {call.name} (call "
                                      f"{call.node_id}) writes constant value {vid}. Re-export "
                                      "the model.")
                if vid in prepacked and vid not in state:
                    state.append(vid)
        return state

    @staticmethod
    def _tensor_ids(graph: vk.VkGraph, out: int) -> list[int]:
        v = graph.values[out].value
        return list(v.items) if isinstance(v, vk.ValueList) else [out]

    def _initial(self, i: int, v: Any, graph: vk.VkGraph, raw: memoryview,
                 context: BackendInitContext | None) -> Any:
        """A value's load-time content: constants' data, scalars, lists; None for tensors
        computed at run time (a ``ValueList`` stays its ids, read when called)."""
        if isinstance(v, vk.VkTensor):
            if v.constant_id < 0:
                return None
            if v.constant_id >= len(graph.constants):
                raise FormatError(f"VulkanBackend: value {i} uses constant {v.constant_id} of "
                                  f"{len(graph.constants)}. Re-export the model.")
            return self._constant(v, graph.constants[v.constant_id], raw, context)
        if isinstance(v, (vk.Int, vk.Bool, vk.Double, vk.String)):
            return next(iter(vars(v).values()))
        if isinstance(v, (vk.IntList, vk.DoubleList, vk.BoolList)):
            return list(v.items)
        if isinstance(v, vk.SymInt):
            return v.value
        return None  # Null, and ValueLists (resolved per call)

    @staticmethod
    def _constant(t: vk.VkTensor, ref: vk.VkBytes, raw: memoryview,
                  context: BackendInitContext | None) -> np.ndarray:
        dtype = _dtype(t, "a constant")
        shape = tuple(int(d) for d in t.dims)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if ref.offset == vk.NAMED_DATA_OFFSET:
            if context is None or ref.named_key is None:
                raise FormatError("VulkanBackend: a constant lives in the program's named data "
                                  f"({ref.named_key!r}) but none was given")
            data = context.named_data(ref.named_key)
        else:
            if ref.offset + ref.length > len(raw):
                raise FormatError(f"VulkanBackend: constant bytes [{ref.offset}, +{ref.length}) "
                                  f"lie outside the blob's {len(raw)} raw bytes.")
            data = raw[ref.offset:ref.offset + ref.length]
        if len(data) < count * dtype.itemsize:
            raise FormatError(f"VulkanBackend: constant {ref.named_key or ref.offset} has "
                              f"{len(data)} bytes, a {dtype}{list(shape)} tensor needs "
                              f"{count * dtype.itemsize}. Re-export the model.")
        return np.frombuffer(data, dtype=dtype, count=count).reshape(shape)

    # ---- running ------------------------------------------------------------------------

    def execute(self, handle: VulkanDelegate, values: list[Any], args: list[int],
                context: BackendExecutionContext | None = None) -> None:
        g = handle.graph
        if len(args) != len(g.input_ids) + len(g.output_ids):
            raise InvalidArgumentError(
                f"VulkanBackend: the delegate takes {len(g.input_ids)} inputs and "
                f"{len(g.output_ids)} outputs, the call passes {len(args)} values")
        slots = list(handle.values)
        for vid, arg in zip(g.input_ids, args):
            slots[vid] = self._stage_in(g.values[vid].value, values[arg])
        tracer = getattr(context, "event_tracer", None)
        for call in handle.calls:
            token = event_tracer_start_profiling_delegate(tracer, call.name, call.node_id)
            self._run(handle, call, slots)
            event_tracer_end_profiling_delegate(tracer, token)
            handle.operators_run[call.name] += 1
        for vid in handle.state_ids:  # after the last call: a failed call changes no state
            handle.values[vid] = slots[vid]
        for vid, arg in zip(g.output_ids, args[len(g.input_ids):]):
            self._stage_out(slots[vid], values, arg, context)

    def _arg(self, g: vk.VkGraph, slots: list[Any], vid: int, fp16: bool) -> Any:
        v = g.values[vid].value
        if isinstance(v, vk.ValueList):
            return [self._arg(g, slots, j, fp16) for j in v.items]
        x = slots[vid]
        if isinstance(v, vk.VkTensor) and x is None:
            raise KernelError(f"VulkanBackend: tensor value {vid} is read before any operator "
                              "wrote it")
        if fp16 and isinstance(x, np.ndarray) and x.dtype == _F16:
            return x.astype(np.float32)  # computed in float32, stored as float16
        return x

    def _run(self, handle: VulkanDelegate, call: _Call, slots: list[Any]) -> None:
        g = handle.graph
        args = [self._arg(g, slots, a, handle.fp16) for a in call.args]
        outs = []
        for vid in call.outs:
            t = g.values[vid].value
            if isinstance(t, vk.VkTensor):
                dt = _dtype(t, f"the output of {call.name}")
                outs.append(np.empty(tuple(t.dims), np.float32 if dt == _F16 else dt))
            else:
                outs.append(None)
        try:
            result = call.fn(*args, *outs)
        except (ArithmeticError, IndexError, TypeError, ValueError) as e:
            raise KernelError(f"VulkanBackend: operator {call.name} (call {call.node_id}) "
                              f"failed: {type(e).__name__}: {e}") from e
        results = list(result) if len(call.outs) > 1 else [result]
        for vid, r in zip(call.outs, results):
            t = g.values[vid].value
            if isinstance(t, vk.VkTensor):
                slots[vid] = np.asarray(r).astype(_dtype(t, call.name), copy=False)
            else:
                slots[vid] = r

    @staticmethod
    def _stage_in(t: Any, x: Any) -> Any:
        """A program input as the delegate holds it (its dtype: int64 -> int32, fp16...)."""
        if isinstance(t, vk.VkTensor):
            arr = np.asarray(x)
            return arr.astype(_dtype(t, "an input"), copy=False)
        return int(x) if isinstance(t, vk.SymInt) else x

    @staticmethod
    def _stage_out(r: Any, values: list[Any], arg: int,
                   context: BackendExecutionContext | None) -> None:
        dst = values[arg]
        if not isinstance(dst, np.ndarray):
            values[arg] = r
            return
        r = np.asarray(r)
        if r.shape != dst.shape:
            if context is None:
                raise InvalidArgumentError(f"VulkanBackend: output of shape {list(r.shape)} "
                                           f"does not fit the program's {list(dst.shape)}")
            dst = context.resize(arg, tuple(r.shape))
        np.copyto(dst, r, casting="unsafe")

    def destroy(self, handle: VulkanDelegate) -> None:
        handle.values.clear()
