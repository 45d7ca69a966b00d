"""Memory planning: which tensors of a method get planned bytes, how long each lives, and where
it goes -- with ExecuTorch's names, call shapes and results.

A spec occupies ``[mem_offset, mem_offset + allocated_memory)`` of arena ``mem_id`` during
``lifetime = [first, last]`` (node positions, inclusive). :func:`apply_algo` sets the lifetimes
(:func:`update_all_tensors_lifetime`), collects the specs to plan in graph order
(:func:`collect_specs_from_nodes`: the order breaks the greedy algorithm's size ties, so it is
ExecuTorch's), plans control-flow submodules first (their bytes are set aside at the bottom of
each arena), then runs the algorithm (``memory_algorithms``) per device and writes
``graph_module.meta["non_const_buffer_sizes"]``. Same specs, same order, same algorithm: the
same offsets as ExecuTorch 1.5.1, hence byte-identical ``.pte`` files.
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate
from torch.export.graph_signature import ConstantArgument, ExportGraphSignature, InputKind
from torch.utils._pytree import tree_flatten

from ..errors import MemoryPlanningError
from ..schema.program import DeviceType, NonConstBufferDevice, TensorShapeDynamism
from . import memory
from .memory_algorithms import (  # noqa: F401  (ExecuTorch's import path for all of these)
    AllocationSpec,
    MemoryAlgoResult,
    MemoryPlanningAlgorithmSuite,
    SharedObject,
    SpecAllocResult,
    algo_name,
    greedy,
    naive,
    pick_shared_obj,
)
from .tensor import TensorSpec

_CONTROL_FLOW = (torch.ops.higher_order.cond, torch.ops.higher_order.map_impl,
                 torch.ops.higher_order.while_loop, torch.ops.higher_order.scan)


# ---- which specs a node holds -------------------------------------------------------------

def _root(spec: TensorSpec) -> TensorSpec:
    while spec.alias_of is not None:  # a view's bytes are its base's
        spec = spec.alias_of
    return spec


def get_node_tensor_specs(node: torch.fx.Node) -> list[TensorSpec]:
    """The tensor specs of ``node`` (a view: its base's; the output node: its arguments')."""
    if node.target is memory.view:
        specs = node.args[0].meta.get("spec")
    elif node.op == "output":  # ExecuTorch's SpecPropPass gives it its arguments' specs
        specs = [a.meta.get("spec") for a in tree_flatten(node.args[0])[0]
                 if isinstance(a, torch.fx.Node)]
    else:
        specs = node.meta.get("spec")
    if isinstance(specs, TensorSpec):
        specs = [specs]
    if not isinstance(specs, (list, tuple)):
        return []
    return [_root(s) for s in specs if isinstance(s, TensorSpec)]


def filter_nodes(inputs: Iterable[Any]) -> list[torch.fx.Node]:
    """The nodes in ``inputs``, looking inside lists, tuples and dicts."""
    return [n for n in tree_flatten(list(inputs))[0] if isinstance(n, torch.fx.Node)]


def _is_out_var_node(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and any(a.is_out for a in node.target._schema.arguments))


def _unwrap(target: Any) -> Any:
    """The ATen overload of an Edge/backend op wrapping one (an ATen one as is)."""
    if isinstance(target, torch._ops.OpOverload):
        return target
    return getattr(target, "_op", target)


def _is_inplace_node(node: torch.fx.Node) -> bool:
    """An in-place operator (torchgen's SchemaKind.inplace: its name ends with ``_``)."""
    op = _unwrap(node.target)
    if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
        return False
    base = op._schema.name.split("::")[-1]
    return base.endswith("_") and not base.startswith("__") and \
        not any(a.is_out for a in op._schema.arguments)


def _alias_inplace_result_specs(node: torch.fx.Node) -> None:
    """An in-place op's results are the inputs it writes (``Tensor(a!)``): give them their
    specs, so both are one tensor to the planner and to the emitter."""
    schema = _unwrap(node.target)._schema
    current = node.meta.get("spec")
    outs = [current] if isinstance(current, TensorSpec) else list(current or [])
    changed = False
    for out_idx, ret in enumerate(schema.returns):
        if ret.alias_info is None or not ret.alias_info.is_write or out_idx >= len(outs):
            continue
        for in_idx, arg in enumerate(schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write or \
                    set(arg.alias_info.before_set) != set(ret.alias_info.before_set):
                continue
            src = node.args[in_idx] if in_idx < len(node.args) else node.kwargs.get(arg.name)
            spec = src.meta.get("spec") if isinstance(src, torch.fx.Node) else None
            if isinstance(spec, TensorSpec):
                outs[out_idx], changed = spec, True
            break
    if changed:
        node.meta["spec"] = outs[0] if isinstance(current, TensorSpec) else type(current)(outs)


# ---- graph inputs, outputs and mutable buffers --------------------------------------------

def _is_mutable_buffer(node: torch.fx.Node, graph_signature: ExportGraphSignature | None = None
                       ) -> bool:
    if graph_signature is None or node.op != "placeholder" or not isinstance(node.target, str):
        return False
    fqn = graph_signature.inputs_to_buffers.get(node.target)
    return fqn is not None and fqn in graph_signature.buffers_to_mutate.values()


def _get_mutable_buffer_specs(nodes: Iterable[torch.fx.Node],
                              graph_signature: ExportGraphSignature | None) -> set[TensorSpec]:
    return {s for n in nodes if _is_mutable_buffer(n, graph_signature)
            for s in get_node_tensor_specs(n)}


def _do_user_inputs_exist(graph_signature: ExportGraphSignature | None) -> bool:
    """True when the method has a user input that is not a Python scalar or string."""
    if graph_signature is None:
        return False
    return any(not isinstance(s.arg, ConstantArgument)
               or not isinstance(s.arg.value, (int, float, bool, str))
               for s in graph_signature.input_specs if s.kind == InputKind.USER_INPUT)


def get_graph_input_tensors(nodes: Iterable[torch.fx.Node],
                            graph_signature: ExportGraphSignature | None = None
                            ) -> set[TensorSpec]:
    return {s for n in nodes if n.op == "placeholder" and not _is_mutable_buffer(n, graph_signature)
            for s in get_node_tensor_specs(n)}


def get_graph_output_tensors(nodes: Iterable[torch.fx.Node]) -> set[TensorSpec]:
    return {s for n in nodes if n.op == "output" for s in get_node_tensor_specs(n)}


# ---- collecting specs and their lifetimes -------------------------------------------------

def collect_specs_from_nodes(  # noqa: C901 -- one filter per ExecuTorch option
    nodes: Iterable[torch.fx.Node],
    graph_signature: ExportGraphSignature | None = None,
    ignore_graph_input: bool = False,
    ignore_graph_output: bool = False,
    ignore_mutable_buffers: bool = False,
    ignore_const: bool = True,
    ignore_out_var_node: bool = True,
    dedup: bool = True,
    do_assertion: bool = True,
    ignore_dynamic_unbound_tensor: bool = True,
) -> Iterable[TensorSpec]:
    """The specs of ``nodes`` in node order, filtered as asked (ExecuTorch's options). An
    out-variant call's result is its ``memory.alloc``'s spec, met earlier, so it is skipped."""
    nodes = list(nodes)
    inputs = get_graph_input_tensors(nodes, graph_signature) if ignore_graph_input else set()
    outputs = get_graph_output_tensors(nodes) if ignore_graph_output else set()
    mutable = _get_mutable_buffer_specs(nodes, graph_signature) if ignore_mutable_buffers else set()
    seen: set[TensorSpec] = set()
    for node in nodes:
        if node.op == "get_attr" or (ignore_out_var_node and _is_out_var_node(node)):
            continue
        specs = get_node_tensor_specs(node)
        if not specs:
            continue
        if _is_inplace_node(node):
            _alias_inplace_result_specs(node)
            continue
        if ignore_mutable_buffers and _is_mutable_buffer(node, graph_signature):
            continue
        if do_assertion and not (node.op in ("placeholder", "output") or node.target in (
                memory.alloc, memory.view, operator.getitem, executorch_call_delegate,
                *_CONTROL_FLOW)):
            raise MemoryPlanningError(f"unexpected node {node.name} ({node.op} {node.target}) "
                                      "holding a tensor spec; run ToOutVarPass before planning")
        for spec in specs:
            if ignore_dynamic_unbound_tensor and \
                    spec.shape_dynamism == TensorShapeDynamism.DYNAMIC_UNBOUND:
                continue  # the runtime allocates those
            if (spec in inputs) or (spec in outputs) or (spec in mutable):
                continue
            if ignore_const and spec.const and not node.meta.get("weight_has_gradient", False):
                continue
            if dedup:
                if spec in seen:
                    continue
                seen.add(spec)
            yield spec


def update_tensor_lifetime(node: torch.fx.Node, spec: TensorSpec, node_idx: int,
                           max_node_idx: int, gs: ExportGraphSignature | None = None) -> None:
    """Extend ``spec``'s lifetime to cover ``node_idx`` (graph inputs start at 0; mutable
    buffers live to the end of the method)."""
    start, end = spec.lifetime
    start = 0 if node.op == "placeholder" else (node_idx if start is None else min(start, node_idx))
    if node.op == "placeholder" and _is_mutable_buffer(node, gs):
        end = max_node_idx
    else:
        end = node_idx if end is None else max(end, node_idx)
    spec.lifetime = [start, end]


def update_all_tensors_lifetime(graph_module: torch.fx.GraphModule,
                                graph_signature: ExportGraphSignature | None = None
                                ) -> set[TensorSpec]:
    """Set the lifetime of every spec a node holds or reads; returns those specs."""
    specs: set[TensorSpec] = set()
    last = len(graph_module.graph.nodes) - 1
    for idx, node in enumerate(graph_module.graph.nodes):
        for spec in collect_specs_from_nodes(
                filter_nodes(itertools.chain([node], node.args, node.kwargs.values())),
                graph_signature, ignore_const=False, ignore_out_var_node=False, dedup=False,
                do_assertion=False, ignore_dynamic_unbound_tensor=False):
            update_tensor_lifetime(node, spec, idx, last, graph_signature)
            specs.add(spec)
    _extend_storage_base_lifetimes(specs)
    return specs


def _extend_storage_base_lifetimes(specs: Iterable[TensorSpec]) -> None:
    """A spec living inside another's storage keeps that storage (and its bases) alive."""
    for spec in specs:
        seen = {spec}
        base = spec.storage_base
        while base is not None:
            if base in seen:
                raise MemoryPlanningError("circular storage_base chain of tensor specs")
            seen.add(base)
            if None in base.lifetime or None in spec.lifetime:
                raise MemoryPlanningError("a storage-backed spec and its storage_base need "
                                          "lifetimes; run update_all_tensors_lifetime first")
            base.lifetime = [min(base.lifetime[0], spec.lifetime[0]),
                             max(base.lifetime[1], spec.lifetime[1])]
            base = base.storage_base


# ---- planning -----------------------------------------------------------------------------

def _contains_xnnpack_delegate(graph_module: torch.fx.GraphModule) -> bool:
    """ExecuTorch pads every arena by 64 bytes when an XNNPACK delegate runs in the method."""
    for node in graph_module.graph.nodes:
        if node.target is executorch_call_delegate:
            lowered = getattr(graph_module, node.args[0].target)
            if "xnnpack" in lowered.backend_id.lower():
                return True
    return False


def _plan_submodules(algo: Callable[..., list[int]], graph_module: torch.fx.GraphModule,
                     alignment: int, graph_signature: ExportGraphSignature | None) -> list[int]:
    """Plan each control-flow body on its own; returns the per-arena maximum, which the
    enclosing graph sets aside below its own tensors."""
    sizes: list[int] = []

    def plan(attr_node: torch.fx.Node, alloc_graph_input: bool = False) -> None:
        sub = getattr(graph_module, attr_node.target)
        sub_sizes = apply_algo(algo, sub, alignment, graph_signature,
                               alloc_graph_input=alloc_graph_input, alloc_graph_output=True)
        sub.meta["non_const_buffer_sizes"] = sub_sizes
        sizes.extend([0] * (len(sub_sizes) - len(sizes)))
        for i, size in enumerate(sub_sizes):
            sizes[i] = max(sizes[i], size)

    nodes = graph_module.graph.nodes
    for target, bodies, with_inputs in (
            (torch.ops.higher_order.cond, (1, 2), False),
            (torch.ops.higher_order.while_loop, (0, 1), False),
            (torch.ops.higher_order.map_impl, (0,), True),
            (torch.ops.higher_order.scan, (0,), True)):
        for node in (n for n in nodes if n.target is target):
            for i in bodies:
                plan(node.args[i], with_inputs)
    return sizes


_CPU = (DeviceType.CPU, 0)


def _by_device(specs: list[TensorSpec], per_device: bool) -> dict[tuple[DeviceType, int],
                                                                  list[TensorSpec]]:
    if not per_device:
        return {_CPU: specs}
    groups: dict[tuple[DeviceType, int], list[TensorSpec]] = defaultdict(list)
    for spec in specs:
        groups[(spec.device, spec.device_index)].append(spec)
    if any(k != _CPU for k in groups) and any(s.mem_id is not None for s in specs):
        raise NotImplementedError(
            "enable_non_cpu_memory_planning cannot be combined with a memory planning pass that "
            "sets spec.mem_id itself (device arenas would collide with the custom ones); "
            "disable one of the two")
    return groups


def apply_algo(algo: Callable[..., list[int]], graph_module: torch.fx.GraphModule,
               alignment: int, graph_signature: ExportGraphSignature | None = None,
               alloc_graph_input: bool = True, alloc_graph_output: bool = True,
               alloc_mutable_buffers: bool = True,
               enable_non_cpu_memory_planning: bool = False) -> list[int]:
    """Plan ``graph_module`` (and its control-flow bodies); returns and stores the arena sizes
    ``graph_module.meta["non_const_buffer_sizes"]`` (index 0: constants, always 0). With
    ``enable_non_cpu_memory_planning``, each device gets arenas of its own (CPU first), listed
    in ``graph_module.meta["non_const_buffer_device"]``."""
    update_all_tensors_lifetime(graph_module, graph_signature)
    specs = list(collect_specs_from_nodes(
        graph_module.graph.nodes, graph_signature, do_assertion=False,
        ignore_graph_input=not alloc_graph_input, ignore_graph_output=not alloc_graph_output,
        ignore_mutable_buffers=not alloc_mutable_buffers))
    reserved = _plan_submodules(algo, graph_module, alignment, graph_signature)
    padding = 64 if _contains_xnnpack_delegate(graph_module) else 0
    groups = _by_device(specs, enable_non_cpu_memory_planning)
    sizes: list[int] = [0]
    devices: list[tuple[DeviceType, int]] = [_CPU]
    for key in sorted(groups, key=lambda k: (k != _CPU, int(k[0]), k[1])):
        graph_module.input_mem_buffer_sizes = reserved if key == _CPU else []
        group_sizes = algo(alignment, groups[key], graph_module, graph_signature, padding)
        base = len(sizes)
        sizes.extend(group_sizes[1:])
        devices.extend([key] * len(group_sizes[1:]))
        for spec in groups[key]:
            if spec.mem_id is not None:
                spec.mem_id += base - 1
    if len(sizes) < 2:
        sizes.append(0)
        devices.append(_CPU)
    graph_module.meta["non_const_buffer_sizes"] = sizes
    if any(d != _CPU for d in devices):
        graph_module.meta["non_const_buffer_device"] = [
            NonConstBufferDevice(buffer_idx=i, device_type=d, device_index=di)
            for i, (d, di) in enumerate(devices) if (d, di) != _CPU]
    return sizes


from .memory_algorithms import ALGORITHMS, MemoryPlan  # noqa: E402,F401
from .memory_verifier import Verifier  # noqa: E402,F401  (needs the functions above)
