"""Graph-signature-aware edits of an ``ExportedProgram`` that backend passes share
(ExecuTorch's ``backends.transforms.utils``): read or replace the tensor behind a weight node,
add or remove a constant placeholder, add a mutable buffer.

Every edit keeps the three places that describe an input in step: the placeholder node, the
graph signature's spec, and ``state_dict`` / ``constants``.
"""

from __future__ import annotations

import torch
from torch._export.utils import (
    get_buffer,
    get_lifted_tensor_constant,
    get_param,
    is_buffer,
    is_lifted_tensor_constant,
    is_param,
)
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

from ...errors import GraphSignatureError

_CONSTANT_INPUTS = (InputKind.CONSTANT_TENSOR, InputKind.USER_INPUT)


def is_get_attr_node(node: torch.fx.Node) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "get_attr"


def is_param_node(exp_prog: ExportedProgram, node: torch.fx.Node) -> bool:
    """A weight-like node: a parameter, buffer or lifted constant placeholder, or get_attr."""
    return (is_get_attr_node(node) or is_param(exp_prog, node) or is_buffer(exp_prog, node)
            or is_lifted_tensor_constant(exp_prog, node))


def get_param_tensor(exp_prog: ExportedProgram, node: torch.fx.Node | None
                     ) -> torch.Tensor | None:
    """The tensor a weight, buffer, lifted constant or ``get_attr`` node stands for."""
    if node is None:
        return None
    if is_param(exp_prog, node):
        return get_param(exp_prog, node)
    if is_buffer(exp_prog, node):
        return get_buffer(exp_prog, node)
    if is_lifted_tensor_constant(exp_prog, node):
        return get_lifted_tensor_constant(exp_prog, node)
    if is_get_attr_node(node):
        owner = node.graph.owning_module or exp_prog.graph_module
        return getattr(owner, node.target)  # type: ignore[arg-type]
    raise GraphSignatureError(f"%{node.name} ({node.op}) is not a weight, buffer, constant or "
                               "get_attr node")


def get_tensor_name(ep: ExportedProgram, node: torch.fx.Node | None) -> str:
    """The state-dict/constants name behind a weight placeholder."""
    if node is None:
        return ""
    sig = ep.graph_signature
    for table in (sig.inputs_to_parameters, sig.inputs_to_buffers,
                  sig.inputs_to_lifted_tensor_constants):
        if node.name in table:
            return table[node.name]
    assert isinstance(node.target, str)
    return node.target


def set_param_tensor(exp_prog: ExportedProgram, node: torch.fx.Node,
                     data: torch.Tensor) -> None:
    """Make ``node`` stand for ``data`` (a parameter stays a parameter, keeping
    ``requires_grad``); the caller updates ``node.meta['val']`` if the shape changed."""
    sig = exp_prog.graph_signature
    if is_param(exp_prog, node):
        target = sig.inputs_to_parameters[node.name]
        old = exp_prog.state_dict[target]
        exp_prog.state_dict[target] = torch.nn.Parameter(data, requires_grad=old.requires_grad)
    elif is_buffer(exp_prog, node):
        target = sig.inputs_to_buffers[node.name]
        table = exp_prog.constants if target in sig.non_persistent_buffers else \
            exp_prog.state_dict
        table[target] = data
    elif is_lifted_tensor_constant(exp_prog, node):
        exp_prog.constants[sig.inputs_to_lifted_tensor_constants[node.name]] = data
    elif is_get_attr_node(node):
        owner = node.graph.owning_module
        if owner is None or not hasattr(owner, node.target):  # type: ignore[arg-type]
            owner = exp_prog.graph_module
        old = getattr(owner, node.target)  # type: ignore[arg-type]
        if isinstance(old, torch.nn.Parameter):
            data = torch.nn.Parameter(data, requires_grad=old.requires_grad)
        setattr(owner, node.target, data)  # type: ignore[arg-type]
    else:
        raise GraphSignatureError(f"%{node.name} ({node.op}) is not a weight, buffer, "
                                   "constant or get_attr node")


def _fake(graph: torch.fx.Graph, data: torch.Tensor) -> torch.Tensor:
    """``data`` as a fake tensor of the graph's fake mode (for ``node.meta['val']``)."""
    mode = detect_fake_mode([n.meta.get("val") for n in graph.nodes])
    if mode is None:
        raise GraphSignatureError("the graph has no fake tensors to take a fake mode from; "
                                   "run it through torch.export first")
    return mode.from_tensor(data, static_shapes=True)


def _named_placeholder(graph: torch.fx.Graph, name: str) -> torch.fx.Node | None:
    return next((n for n in graph.nodes
                 if n.op == "placeholder" and n.meta.get("requested_name") == name), None)


def _new_placeholder(graph: torch.fx.Graph, name: str) -> torch.fx.Node:
    # fx may rename the node (a clash, an invalid identifier): its final name is the target
    node = graph.create_node("placeholder", name, name=name)
    node.target = node.name
    node.meta["requested_name"] = name
    return node


def _resign(exp_prog: ExportedProgram, inputs: list[InputSpec],
            outputs: list[OutputSpec]) -> None:
    exp_prog._graph_signature = ExportGraphSignature(inputs, outputs)


def create_constant_placeholder(exp_program: ExportedProgram, graph: torch.fx.Graph, name: str,
                                kind: InputKind, data: torch.Tensor,
                                persistent_buffer: bool | None = None) -> torch.fx.Node:
    """A new parameter, buffer or lifted-constant placeholder holding ``data``, inserted at the
    graph's insertion point (which must lie before the user inputs). Asking again for the same
    name returns the node made the first time."""
    existing = _named_placeholder(graph, name)
    if existing is not None:
        if existing.name in exp_program.graph_signature.buffers_to_mutate:
            raise GraphSignatureError(f"placeholder {name!r} already exists as a mutable "
                                       "buffer; a constant cannot share it")
        return existing
    if kind == InputKind.BUFFER and persistent_buffer is None:
        raise GraphSignatureError("set persistent_buffer when creating a buffer")
    if kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
        raise GraphSignatureError(f"only constant inputs can be created, not {kind.name}")
    fake = _fake(graph, data)
    node = _new_placeholder(graph, name)
    node.meta["val"] = fake
    target = node.name
    inputs = list(exp_program.graph_signature.input_specs)
    index = [n.name for n in graph.nodes if n.op == "placeholder"].index(node.name)
    if any(i < index for i, s in enumerate(inputs) if s.kind == InputKind.USER_INPUT):
        graph.erase_node(node)
        raise GraphSignatureError(f"cannot insert {name!r} after a user input: constant "
                                   "placeholders go before the user inputs (use "
                                   "graph.inserting_before(first user input))")
    if kind == InputKind.PARAMETER:
        exp_program.state_dict[target] = torch.nn.Parameter(data, requires_grad=False)
    elif kind == InputKind.BUFFER and persistent_buffer:
        exp_program.state_dict[target] = data
    else:
        exp_program.constants[target] = data
    persistent = persistent_buffer if kind == InputKind.BUFFER else None
    inputs.insert(index, InputSpec(kind, TensorArgument(node.name), target, persistent))
    _resign(exp_program, inputs, list(exp_program.graph_signature.output_specs))
    return node


def delete_constant_placeholder(exp_program: ExportedProgram, node: torch.fx.Node) -> None:
    """Remove an unused parameter, buffer or lifted-constant placeholder with its spec and
    its tensor."""
    if node.users:
        raise GraphSignatureError(f"cannot delete %{node.name}: it still has users "
                                   f"{[u.name for u in node.users]}")
    sig = exp_program.graph_signature
    if node.name in sig.inputs_to_parameters:
        del exp_program.state_dict[sig.inputs_to_parameters[node.name]]
    elif node.name in sig.inputs_to_buffers:
        target = sig.inputs_to_buffers[node.name]
        table = exp_program.constants if target in sig.non_persistent_buffers else \
            exp_program.state_dict
        del table[target]
    elif node.name in sig.inputs_to_lifted_tensor_constants:
        del exp_program.constants[sig.inputs_to_lifted_tensor_constants[node.name]]
    else:
        raise GraphSignatureError(f"cannot delete %{node.name}: it is not a parameter, buffer "
                                   "or lifted constant")
    _resign(exp_program, [s for s in sig.input_specs if s.arg.name != node.name],
            list(sig.output_specs))
    node.graph.erase_node(node)


def create_mutable_buffer(exp_program: ExportedProgram, name: str,
                          data: torch.Tensor) -> torch.fx.Node:
    """A new buffer placeholder (after the other weights) holding ``data`` and written back
    as a buffer mutation (after the other mutations). ``name`` follows export's convention:
    placeholder ``b_x`` is the buffer ``x``."""
    if not name or not name.strip():
        raise GraphSignatureError("a buffer needs a name")
    if not isinstance(data, torch.Tensor):
        raise GraphSignatureError(f"a buffer holds a torch.Tensor, not {type(data).__name__}")
    graph = exp_program.graph_module.graph
    if _named_placeholder(graph, name) is not None:
        raise GraphSignatureError(f"a placeholder for {name!r} already exists")
    target = name.removeprefix("b_")
    if target in exp_program.state_dict:
        raise GraphSignatureError(f"buffer {target!r} already exists in the state dict")
    sig = exp_program.graph_signature
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if [n.name for n in placeholders] != [s.arg.name for s in sig.input_specs]:
        raise GraphSignatureError("the graph's placeholders and its signature disagree; "
                                   "fix the signature before adding a buffer")
    fake = _fake(graph, data)
    inputs, outputs = list(sig.input_specs), list(sig.output_specs)
    index = next((i for i, s in enumerate(inputs) if s.kind in _CONSTANT_INPUTS), len(inputs))
    if index < len(placeholders):
        with graph.inserting_before(placeholders[index]):
            node = _new_placeholder(graph, name)
    else:
        with graph.inserting_after(placeholders[-1]) if placeholders else \
                graph.inserting_before(None):
            node = _new_placeholder(graph, name)
    target = node.name.removeprefix("b_")
    if target in exp_program.state_dict:
        graph.erase_node(node)
        raise GraphSignatureError(f"buffer {target!r} already exists in the state dict")
    node.meta["val"] = fake
    exp_program.state_dict[target] = data
    inputs.insert(index, InputSpec(InputKind.BUFFER, TensorArgument(node.name), target, True))
    out_index = next((i for i, s in enumerate(outputs) if s.kind == OutputKind.USER_OUTPUT), 0)
    outputs.insert(out_index, OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(node.name),
                                         target))
    output_node = graph.output_node()
    results = list(output_node.args[0])
    results.insert(out_index, node)
    output_node.args = (results,)
    _resign(exp_program, inputs, outputs)
    return node
