"""Graph edits the Cortex-M passes share: new constant inputs, scratch buffers, parameter
lookups (ExecuTorch's ``backends/transforms/utils.py`` helpers, on edgetorch's programs)."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument
from torch.fx import Node

from ....exir import memory


def is_param_node(ep: ExportedProgram, node: object) -> bool:
    sig = ep.graph_signature
    return isinstance(node, Node) and node.op == "placeholder" and (
        node.name in sig.inputs_to_parameters or node.name in sig.inputs_to_buffers
        or node.name in sig.inputs_to_lifted_tensor_constants)


def get_param_tensor(ep: ExportedProgram, node: Node | None) -> torch.Tensor | None:
    """The constant a placeholder stands for (parameter, buffer or lifted constant)."""
    if node is None:
        return None
    sig = ep.graph_signature
    for table, store in ((sig.inputs_to_parameters, ep.state_dict),
                         (sig.inputs_to_buffers, None),
                         (sig.inputs_to_lifted_tensor_constants, ep.constants)):
        if node.name in table:
            target = table[node.name]
            if store is None:
                store = ep.state_dict if target in ep.state_dict else ep.constants
            value = store[target]
            return value.data if isinstance(value, torch.nn.Parameter) else value
    return None


def _fake_mode(graph: torch.fx.Graph) -> FakeTensorMode:
    for node in graph.nodes:
        mode = getattr(node.meta.get("val"), "fake_mode", None)
        if mode is not None:
            return mode
    return FakeTensorMode()


def create_constant_placeholder(ep: ExportedProgram, graph: torch.fx.Graph, name: str,
                                data: torch.Tensor) -> Node:
    """A new PARAMETER input ``name`` holding ``data``, at the graph's insertion point (which
    must lie among the constant inputs); the signature lists it in graph order. An input of
    that name already present is returned as it is (shared weights)."""
    for node in graph.nodes:
        if node.op == "placeholder" and node.name == name:
            return node
    node = graph.placeholder(name)
    if node.name != name:
        raise RuntimeError(f"graph already has a node named {name!r}")
    node.meta["val"] = _fake_mode(graph).from_tensor(data, static_shapes=True)
    ep.state_dict[name] = torch.nn.Parameter(data, requires_grad=False)
    names = [n.name for n in graph.nodes if n.op == "placeholder"]
    index = names.index(name)
    specs = ep.graph_signature.input_specs
    if any(s.kind == InputKind.USER_INPUT for s in specs[:index]):
        raise RuntimeError(f"constant input {name!r} must come before the user inputs")
    specs.insert(index, InputSpec(InputKind.PARAMETER, TensorArgument(name), name, None))
    return node


def scratch_alloc(graph: torch.fx.Graph, before: Node, size: int = 0) -> Node:
    """A ``memory.alloc`` of ``size`` bytes for a CMSIS-NN kernel's scratch buffer (its size
    is set once the op is in place, see ``set_scratch_sizes``)."""
    with graph.inserting_before(before):
        node = graph.call_function(memory.alloc, (((size,), torch.uint8),))
    node.meta["val"] = torch.empty((size,), dtype=torch.uint8, device="meta")
    return node


def fake(node: object) -> torch.Tensor:
    """The first fake tensor of a node's value."""
    val = node.meta["val"] if isinstance(node, Node) else node
    return val[0] if isinstance(val, (tuple, list)) else val
