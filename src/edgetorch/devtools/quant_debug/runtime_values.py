"""The runtime stages: a ``.pte`` run by edgetorch's runtime with an event tracer and a debug
buffer (what ExecuTorch writes into an ETDump), read back as one value per debug handle.

Kernel instructions log their outputs (``debug_buffer_size`` > 0); the instruction's debug
handle comes from the program's ``debug_handle_map``. Delegates log their inner values when
the tracer asks (``RecordingEventTracer(..., delegate_intermediate_outputs=True)``): XNNPACK
one per node, raw (int8, channels-last), which :class:`XnnpackValues` turns back into float
values in the layout of the Edge graph, using the blob's own quantization parameters and
transposes. The Arm delegates (TOSA, Ethos-U, VGF) run their TOSA graph in tosa-tools'
simulation, which logs every TOSA operator's output by tensor name (``arm.runtime.tosa_sim``);
:class:`TosaValues` maps those tensors back to the Edge nodes (``arm.tosa.value_map``) and
dequantizes them with each node's output quantizer. Backends registered in
:data:`DELEGATE_READERS` do the same for theirs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import QuantDebugError
from ...runtime import Runtime
from ...runtime.event_tracer import DebugEvent, RecordingEventTracer
from .layers import fused_activations, program_nodes

log = logging.getLogger(__name__)

# The runtime stages run VGF delegates in the TOSA simulation (not the ML SDK's scenario-runner,
# which returns outputs only): its per-operator values are the layers' values.
SIMULATION_OPTIONS = {"VgfBackend": {"simulation": "tosa"}}

DEFAULT_DEBUG_BUFFER = 1 << 28  # 256 MiB to start with: every logged value of one execute
MAX_DEBUG_BUFFER = 1 << 34  # ... growing, by doubling, up to 16 GiB
_NODE = re.compile(r"#(\d+)$")

# backend id -> reader(lowered_module) -> decode(name, raw) -> [(handle, float value)...]
DelegateReader = Callable[[str, np.ndarray], "list[tuple[int, np.ndarray]]"]
DELEGATE_READERS: dict[str, Callable[[Any], DelegateReader]] = {}


def delegate_reader(backend_id: str):
    def deco(fn: Callable[[Any], DelegateReader]) -> Callable[[Any], DelegateReader]:
        if backend_id in DELEGATE_READERS:
            raise QuantDebugError(f"a delegate value reader for {backend_id} is registered")
        DELEGATE_READERS[backend_id] = fn
        return fn
    return deco


class XnnpackValues:
    """Per XNNPACK node: its debug handle, and how to read its logged output as the float
    tensor the Edge graph computes (dequantized with the value's per-tensor parameters, moved
    back from the blob's physical layout through the transposes XNNPACK's lowering added)."""

    def __init__(self, blob: bytes, permutes: dict[int, tuple[int, ...]] | None = None) -> None:
        """``permutes``: {debug handle: output shape} of the model's own permute nodes in the
        delegated graph. A transpose computing one of them gives that node's value as is; any
        other transpose is one the lowering added (to channels-last and back)."""
        permutes = permutes or {}
        from ...backends.xnnpack import schema as x
        from ...backends.xnnpack.runtime.nodes import node_value_ids
        from ...backends.xnnpack.serialization import deserialize_xnnpack_binary

        graph = deserialize_xnnpack_binary(blob).graph
        values = {v.tensor.id_out: v for v in graph.xvalues}
        layout: dict[int, tuple[int, ...]] = {}
        for vid in graph.input_ids:
            layout[vid] = tuple(range(len(values[vid].tensor.dims)))
        self.nodes: list[tuple[int, tuple[int, ...], tuple[float, int] | None, bool]] = []
        for node in graph.xnodes:
            u = node.xnode_union
            ins, outs = node_value_ids(u)
            if not outs:
                self.nodes.append((int(node.debug_handle), (), None, False))
                continue
            out = values[outs[0]]
            rank = len(out.tensor.dims)
            source = next((layout[i] for i in ins if i in layout), None)
            own = permutes.get(int(node.debug_handle))
            if isinstance(u, x.XNNStaticTranspose) and own == tuple(out.tensor.dims):
                perm = tuple(range(rank))
            elif isinstance(u, x.XNNStaticTranspose) and source is not None:
                perm = tuple(source[p] for p in u.perm)
            elif source is not None and len(source) == rank and \
                    not isinstance(u, x.XNNStaticReshape):
                perm = source
            else:
                perm = tuple(range(rank))
            layout[outs[0]] = perm
            qp, dynamic = None, False
            if isinstance(out.xvalue_union, x.XNNQuantizedTensorValue):
                params = out.xvalue_union.quant_params
                if isinstance(params, x.PerTensorQuant):
                    qp = (float(params.scale), int(params.zero_point))
                else:
                    dynamic = True  # per-token / per-channel values: no fixed scale to read
            self.nodes.append((int(node.debug_handle), perm, qp, dynamic))

    def __call__(self, name: str, raw: np.ndarray) -> list[tuple[int, np.ndarray]]:
        m = _NODE.search(name or "")
        if m is None or int(m.group(1)) >= len(self.nodes):
            return []
        handle, perm, qp, dynamic = self.nodes[int(m.group(1))]
        if dynamic or not isinstance(raw, np.ndarray) or not perm:
            return []
        value = raw.astype(np.float32)
        if qp is not None:
            value = (value - np.float32(qp[1])) * np.float32(qp[0])
        elif not np.issubdtype(raw.dtype, np.floating):
            return []
        if value.ndim == len(perm) and perm != tuple(range(len(perm))):
            value = value.transpose(np.argsort(perm))
        return [(handle, value)]


@delegate_reader("XnnpackBackend")
def _xnnpack(lowered: Any) -> DelegateReader:
    permutes = {}
    for node in lowered.original_module.graph.nodes:
        handle, val = node.meta.get("debug_handle"), node.meta.get("val")
        if isinstance(handle, int) and "permute" in str(node.target) and hasattr(val, "shape"):
            permutes[handle] = tuple(int(d) for d in val.shape)
    return XnnpackValues(lowered.processed_bytes, permutes)


class TosaValues:
    """Per TOSA tensor of an Arm delegate: the Edge nodes whose quantized value it holds,
    read back as float tensors in torch's layout (see ``arm.tosa.value_map``).

    The map comes from lowering the delegate's partition again; when the TOSA graph this
    process compiled for it is known (``reference``), the two graphs must be equal, else no
    value is read (a map of another graph would put values on the wrong layers)."""

    def __init__(self, lowered: Any, reference: bytes | None) -> None:
        from ...backends.arm.tosa.specification import TosaSpecification
        from ...backends.arm.tosa.value_map import tosa_value_map

        self.by_tensor: dict[str, list[tuple[int, Any]]] = {}
        spec = next((bytes(c.value).decode("utf-8", "replace") for c in lowered.compile_specs
                     if c.key == "tosa_spec"), None)
        if spec is None:
            log.warning("%s delegate without a tosa_spec compile spec: no per-operator values",
                        lowered.backend_id)
            return
        ep = lowered.original_module
        tosa, found = tosa_value_map(ep, TosaSpecification.create_from_string(spec))
        if reference is not None and tosa != bytes(reference):
            log.warning("%s delegate: lowering its partition again gives another TOSA graph "
                        "than the one it runs; no per-operator values", lowered.backend_id)
            return
        handles = {n.name: n.meta.get("debug_handle") for n in ep.graph_module.graph.nodes}
        for node, value in found.items():
            if isinstance(handles.get(node), int):
                self.by_tensor.setdefault(value.tensor, []).append((handles[node], value))

    def __call__(self, name: str, raw: np.ndarray) -> list[tuple[int, np.ndarray]]:
        if not isinstance(raw, np.ndarray) or not np.issubdtype(raw.dtype, np.integer):
            return []
        return [(handle, value.to_torch_layout(raw)) for handle, value in
                self.by_tensor.get(name or "", ()) if raw.size == int(np.prod(value.shape))]


@delegate_reader("TOSABackend")
def _tosa(lowered: Any) -> DelegateReader:
    return TosaValues(lowered, lowered.processed_bytes)  # the blob is the .tosa itself


@delegate_reader("EthosUBackend")
def _ethos_u(lowered: Any) -> DelegateReader:
    from ...backends.arm.ethosu.compiled import COMPILED, blob_key

    part = COMPILED.get(blob_key(lowered.processed_bytes))
    return TosaValues(lowered, part.tosa if part is not None else None)


@delegate_reader("VgfBackend")
def _vgf(lowered: Any) -> DelegateReader:
    from ...backends.arm.vgf.compiled import COMPILED, blob_key

    return TosaValues(lowered, COMPILED.get(blob_key(lowered.processed_bytes)))


class RuntimeStage:
    """A program loaded with a tracer; :meth:`run` executes one sample and returns
    ``({debug handle: value}, first output)``."""

    def __init__(self, et_manager: Any, debug_buffer_size: int = DEFAULT_DEBUG_BUFFER,
                 backend_options: dict | None = None) -> None:
        self.tracer = RecordingEventTracer(debug_buffer_size, delegate_intermediate_outputs=True)
        options = {**SIMULATION_OPTIONS, **(backend_options or {})}
        self.program = Runtime.get().load_program(et_manager.buffer, event_tracer=self.tracer,
                                                  backend_options=options)
        self.method = self.program.load_method("forward")
        self.handle_map: dict[int, Any] = dict(et_manager.debug_handle_map.get("forward", {}))
        self.readers: dict[int, DelegateReader] = {}
        ep = et_manager.exported_program()
        seen: dict[int, Any] = {}
        for node, lowered in program_nodes(ep):
            if lowered is not None and isinstance(node.meta.get("debug_handle"), int):
                seen.setdefault(id(lowered), (lowered, set()))[1].add(node.meta["debug_handle"])
        lowered_by_handles = [(frozenset(h), low) for low, h in seen.values()]
        for instr, handles in self.handle_map.items():
            if not isinstance(handles, list):
                continue
            wanted = set(handles)
            best = max(lowered_by_handles, key=lambda e: len(e[0] & wanted), default=None)
            if best is None or not best[0] & wanted:
                continue
            factory = DELEGATE_READERS.get(best[1].backend_id)
            if factory is not None:
                self.readers[instr] = factory(best[1])
        self.fused: dict[int, int] | None = None
        self.ep = ep

    def run(self, inputs: Sequence[np.ndarray]) -> tuple[dict[int, np.ndarray], np.ndarray]:
        while True:
            self.tracer.reset()
            outputs = self.method.execute(list(inputs))
            if not self.tracer.debug_buffer_overflowed:
                break
            # The size is a cap on the copies kept, not memory taken up front: grow it (a
            # large model logs every dequantized weight) and run the sample again.
            size = self.tracer.debug_buffer_size
            if 2 * size > MAX_DEBUG_BUFFER:
                raise QuantDebugError(f"the debug buffer ({size} bytes) cannot hold one "
                                      "execute's values, and twice that is over "
                                      f"{MAX_DEBUG_BUFFER} bytes: debug fewer samples' "
                                      "layers at a time (stages=...) or a smaller model")
            log.info("debug buffer of %d bytes full: running the sample again with %d",
                     size, 2 * size)
            self.tracer.debug_buffer_size = 2 * size
        values: dict[int, np.ndarray] = {}
        logged: set[int] = set()
        for event in self.tracer.events("Execute"):
            if not isinstance(event, DebugEvent) or event.output or event.chain_index != 0:
                continue
            if event.delegate_debug_id_str is not None or event.name is not None:
                reader = self.readers.get(event.instruction_id)
                if reader is not None:
                    values.update(reader(event.delegate_debug_id_str or event.name, event.value))
                continue
            handle = self.handle_map.get(event.instruction_id)
            if isinstance(handle, int) and event.instruction_id not in logged:
                logged.add(event.instruction_id)  # a multi-output op: its first output
                value = event.value[0] if isinstance(event.value, list) else event.value
                if isinstance(value, np.ndarray):
                    values[handle] = value
        if self.readers:
            if self.fused is None:
                self.fused = fused_activations(self.ep, set(values))
            for act, producer in self.fused.items():
                if producer in values:
                    values[act] = values.pop(producer)
        out = outputs[0]
        return values, np.asarray(out)
