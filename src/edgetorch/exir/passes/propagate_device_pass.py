"""Device placement of delegate tensors (ExecuTorch's ``exir.passes.propagate_device_pass``).

A partitioner asks for a device by adding the compile spec ``TARGET_DEVICE_COMPILE_SPEC_KEY``
(``CompileSpec("target_device", b"cuda:0")``). After ``to_backend``, :class:`PropagateDevicePass`
puts that delegate's tensors on the device (``TensorSpec.device``/``device_index``):

* with ``enable_non_cpu_memory_planning`` (ExecuTorch's default), each delegate input gets an
  ``et_copy._h2d_copy`` whose result is on the device, and each delegate result read by a
  ``getitem`` stays on the device and gets an ``et_copy._d2h_copy`` back to the host for its
  users; a ``d2h`` feeding an ``h2d`` to the same device is elided. The planner then gives the
  device tensors arenas of their own (``non_const_buffer_device``), which a runtime allocates
  with that device's allocator;
* without it, the delegate's inputs and results are only tagged (all tensors stay planned in
  host memory).

Like ExecuTorch's, the pass works on a graph module whose nodes have specs.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ...errors import ExportError
from ...schema.program import DeviceType
from ..tensor import TensorSpec
from . import _device_copy_ops_registry  # noqa: F401  (defines torch.ops.et_copy)
from .propagate_device_config import PropagateDeviceConfig  # noqa: F401  (ExecuTorch's import path)

TARGET_DEVICE_COMPILE_SPEC_KEY = "target_device"


def _parse_device_spec_value(value: bytes) -> tuple[DeviceType, int]:
    """``b"cuda:0"`` -> ``(DeviceType.CUDA, 0)``; the type is matched case-insensitively."""
    text = bytes(value).decode("utf-8").strip().lower()
    type_str, _, index_str = text.partition(":")
    device = next((d for d in DeviceType if d.name.lower() == type_str), None)
    if device is None:
        raise ValueError(f"Unknown device type '{type_str}'. Valid types: "
                         f"{', '.join(d.name for d in DeviceType)}")
    return device, int(index_str) if index_str else 0


def _target_device(graph_module: torch.fx.GraphModule, node: torch.fx.Node
                   ) -> tuple[DeviceType, int] | None:
    lowered_node = node.args[0] if node.args else None
    lowered = getattr(graph_module, lowered_node.target, None) \
        if isinstance(lowered_node, torch.fx.Node) and lowered_node.op == "get_attr" else None
    if lowered is None or not hasattr(lowered, "compile_specs"):
        raise ExportError(
            f"executorch_call_delegate node '{node.name}' does not reference a valid "
            "LoweredBackendModule. The first argument must be a get_attr node pointing to a "
            "LoweredBackendModule attribute.")
    return _get_target_device_from_compile_specs(lowered)


def _get_target_device_from_compile_specs(lowered_module: object
                                          ) -> tuple[DeviceType, int] | None:
    """The ``(device type, index)`` a lowered module's ``target_device`` compile spec asks
    for, or None."""
    for spec in lowered_module.compile_specs:
        if spec.key == TARGET_DEVICE_COMPILE_SPEC_KEY:
            return _parse_device_spec_value(spec.value)
    return None


def _tag(specs: object, device: DeviceType, index: int) -> bool:
    specs = [specs] if isinstance(specs, TensorSpec) else specs
    if not isinstance(specs, (list, tuple)):
        return False
    tagged = [s for s in specs if isinstance(s, TensorSpec)]
    for s in tagged:
        s.device, s.device_index = device, index
    return bool(tagged)


def _clone_on(spec: TensorSpec, device: DeviceType, index: int) -> TensorSpec:
    """A fresh, unplanned copy of ``spec`` on ``device``."""
    new = copy.copy(spec)
    new.mem_id = new.mem_offset = new.mem_obj_id = None
    new.lifetime = [None, None]
    new.alias_of = new.storage_base = None
    new.const, new.storage, new.fqn = False, None, None
    new.device, new.device_index = device, index
    return new


def _is_copy(node: torch.fx.Node, name: str) -> bool:
    packet = getattr(node.target, "overloadpacket", None)
    return node.op == "call_function" and packet is getattr(torch.ops.et_copy, name)


def _copy_node(graph: torch.fx.Graph, op: object, src: torch.fx.Node, spec: TensorSpec
               ) -> torch.fx.Node:
    node = graph.call_function(op, (src,))
    node.meta["spec"] = spec
    node.meta["val"] = src.meta.get("val")
    if "tensor_meta" in src.meta:
        node.meta["tensor_meta"] = src.meta["tensor_meta"]
    return node  # no debug handle, as ExecuTorch's: no Edge node runs in a copy


class PropagateDevicePass(PassBase):
    """Tensors of delegates with a ``target_device`` compile spec go on that device, with
    host/device copies at the boundary (see the module's docstring)."""

    def __init__(self, skip_h2d_for_method_inputs: bool = False,
                 skip_d2h_for_method_outputs: bool = False,
                 enable_non_cpu_memory_planning: bool = False) -> None:
        super().__init__()
        if (skip_h2d_for_method_inputs or skip_d2h_for_method_outputs) \
                and not enable_non_cpu_memory_planning:
            raise ValueError(
                "skip_h2d_for_method_inputs and skip_d2h_for_method_outputs are only "
                "meaningful when enable_non_cpu_memory_planning=True, since they control "
                "host/device copy insertion which only happens during device-aware memory "
                "planning. Set enable_non_cpu_memory_planning=True, or leave the skip options "
                "disabled.")
        self.skip_h2d_for_method_inputs = skip_h2d_for_method_inputs
        self.skip_d2h_for_method_outputs = skip_d2h_for_method_outputs
        self.enable_non_cpu_memory_planning = enable_non_cpu_memory_planning

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = False
        on_device: set[torch.fx.Node] = set()
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or node.target is not executorch_call_delegate:
                continue
            target = _target_device(graph_module, node)
            if target is None:
                continue
            on_device.add(node)
            if self.enable_non_cpu_memory_planning:
                changed |= self._copy_inputs(graph_module, node, *target)
            else:
                for arg in node.args[1:]:
                    if isinstance(arg, torch.fx.Node):
                        changed |= _tag(arg.meta.get("spec"), *target)
            changed |= _tag(node.meta.get("spec"), *target)
        for node in list(graph_module.graph.nodes):
            if node.op == "call_function" and node.target is operator.getitem \
                    and node.args[0] in on_device:
                changed |= self._result_on_device(graph_module, node)
        if changed:
            self._elide_round_trips(graph_module)
        graph_module.recompile()
        return PassResult(graph_module, changed)

    def _copy_inputs(self, gm: torch.fx.GraphModule, node: torch.fx.Node, device: DeviceType,
                     index: int) -> bool:
        changed = False
        args = list(node.args)
        for i, arg in enumerate(node.args[1:], start=1):
            spec = arg.meta.get("spec") if isinstance(arg, torch.fx.Node) else None
            if not isinstance(spec, TensorSpec):
                continue
            if _is_copy(arg, "_h2d_copy"):  # copied already: a lowered program lowered again
                changed |= _tag(spec, device, index)
                continue
            if self.skip_h2d_for_method_inputs and arg.op == "placeholder":
                if len(arg.users) != 1:
                    raise ExportError(
                        f"skip_h2d_for_method_inputs=True requires placeholder '{arg.name}' to "
                        f"have exactly one user, but it has {len(arg.users)} users. The "
                        "placeholder is shared by multiple consumers, so its TensorSpec cannot "
                        "be safely mutated in-place to the delegate's device. Either disable "
                        "skip_h2d_for_method_inputs, or ensure the placeholder is used "
                        "exclusively by this delegate.")
                _tag(spec, device, index)
                changed = True
                continue
            with gm.graph.inserting_before(node):
                args[i] = _copy_node(gm.graph, torch.ops.et_copy._h2d_copy.default, arg,
                                     _clone_on(spec, device, index))
            changed = True
        node.args = tuple(args)
        return changed

    def _result_on_device(self, gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
        spec, sources, idx = node.meta.get("spec"), node.args[0].meta.get("spec"), node.args[1]
        if not (isinstance(spec, TensorSpec) and isinstance(sources, (tuple, list))
                and isinstance(idx, int) and idx < len(sources)
                and isinstance(sources[idx], TensorSpec)):
            return False
        spec.device, spec.device_index = sources[idx].device, sources[idx].device_index
        if not self.enable_non_cpu_memory_planning:
            return True
        if self.skip_d2h_for_method_outputs and all(u.op == "output" for u in node.users):
            return True
        if any(_is_copy(u, "_d2h_copy") for u in node.users):
            return True  # copied back already (a lowered program lowered again)
        with gm.graph.inserting_after(node):
            back = _copy_node(gm.graph, torch.ops.et_copy._d2h_copy.default, node,
                              _clone_on(spec, DeviceType.CPU, 0))
        node.replace_all_uses_with(back, delete_user_cb=lambda user: user is not back)
        return True

    @staticmethod
    def _elide_round_trips(gm: torch.fx.GraphModule) -> None:
        """``_h2d_copy(_d2h_copy(x))`` back to the device ``x`` is on: use ``x``."""
        h2d, d2h = torch.ops.et_copy._h2d_copy.default, torch.ops.et_copy._d2h_copy.default
        for node in list(gm.graph.nodes):
            src = node.args[0] if node.op == "call_function" and node.target is h2d else None
            if not (isinstance(src, torch.fx.Node) and src.target is d2h):
                continue
            x = src.args[0]
            x_spec, spec = x.meta.get("spec"), node.meta.get("spec")
            if isinstance(x_spec, TensorSpec) and isinstance(spec, TensorSpec) and \
                    (x_spec.device, x_spec.device_index) == (spec.device, spec.device_index):
                node.replace_all_uses_with(x)
                gm.graph.erase_node(node)
                if not src.users:  # kept while it still feeds a host consumer
                    gm.graph.erase_node(src)


def place_on_devices(graph_module: torch.fx.GraphModule, config: object, method: str) -> None:
    """``to_executorch``'s step: :class:`PropagateDevicePass` with the options of
    ``ExecutorchBackendConfig`` for ``method``, then the copies it inserted become ``.out``
    calls into ``memory.alloc`` buffers holding their (device) specs, as ExecuTorch's
    ``ToOutVarPass`` makes them (edgetorch makes specs after out variants)."""
    from .to_out_variant import _alloc

    device_config = getattr(config, "propagate_device_config", None)
    if isinstance(device_config, dict):
        device_config = device_config.get(method)
    skip_h2d, skip_d2h = device_config.for_method(method) if device_config else (False, False)
    PropagateDevicePass(skip_h2d, skip_d2h,
                        bool(getattr(config, "enable_non_cpu_memory_planning", True))
                        ).call(graph_module)
    outs = {torch.ops.et_copy._h2d_copy.default: torch.ops.et_copy._h2d_copy.out,
            torch.ops.et_copy._d2h_copy.default: torch.ops.et_copy._d2h_copy.out}
    for node in list(graph_module.graph.nodes):
        if node.op == "call_function" and node.target in outs:
            alloc = _alloc(graph_module.graph, node.meta["val"], node)
            alloc.meta["spec"] = node.meta["spec"]
            node.target, node.kwargs = outs[node.target], {"out": alloc}
    graph_module.recompile()
