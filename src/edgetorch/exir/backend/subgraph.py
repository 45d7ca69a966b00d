"""Tagged nodes -> delegated subgraphs, with torch.fx's fuser utilities.

For each tag, the tagged nodes are cut out of the graph (``fuse_as_graphmodule``), become an
``ExportedProgram`` of their own (weights used only by them move along), are compiled by
``to_backend(backend_id, ...)``, and are replaced in the graph by one
``executorch_call_delegate`` node whose outputs are read with ``getitem``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import ExportedProgram
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from torch.fx.passes.tools_common import legalize_graph
from torch.fx.passes.utils.fuser_utils import (
    erase_nodes,
    fuse_as_graphmodule,
    insert_subgm,
    topo_sort,
    validate_partition,
)
from torch.utils import _pytree as pytree

from ...errors import ExportError
from ..debug_handles import next_debug_handle
from ..node_meta import copy_provenance
from .lowered_backend_module import (
    LoweredBackendModule,
    executorch_call_delegate,
    get_lowered_module_name,
)
from .partitioner import TAG, DelegationSpec

logger = logging.getLogger(__name__)

_CONSUMABLE = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)

Lower = Callable[[str, ExportedProgram, list], LoweredBackendModule]


@dataclass
class Owner:
    """The program being partitioned: its graph module, and the signature and weights that
    change as delegates take over placeholders."""

    ep: ExportedProgram
    input_specs: dict[str, InputSpec] = field(default_factory=dict)
    state_dict: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)
    # one per argument of the output node, in order (buffer mutations a delegate takes over
    # leave both)
    output_specs: list[OutputSpec] = field(default_factory=list)

    @classmethod
    def of(cls, ep: ExportedProgram) -> Owner:
        specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
        return cls(ep, specs, dict(ep.state_dict), dict(ep.constants),
                   list(ep.graph_signature.output_specs))

    @property
    def gm(self) -> torch.fx.GraphModule:
        return self.ep.graph_module

    def weight(self, spec: InputSpec) -> torch.Tensor:
        if spec.target in self.state_dict:
            return self.state_dict[spec.target]
        return self.constants[spec.target]


def _mutations(owner: Owner) -> dict[str, torch.fx.Node]:
    """Mutated buffer (its target) -> the node whose value the program writes back to it."""
    out = owner.gm.graph.output_node().args[0]
    return {spec.target: node for spec, node in zip(owner.output_specs, out)
            if spec.kind == OutputKind.BUFFER_MUTATION and isinstance(node, torch.fx.Node)}


def _owns_mutation(node: torch.fx.Node | None, tag: str) -> bool:
    """The new value of a mutated buffer is computed in partition ``tag`` and used nowhere
    else but once as the write-back, so the delegate can keep the buffer (ExecuTorch's
    ``take_over_mutable_buffer``)."""
    if node is None or node.meta.get(TAG) != tag:
        return False
    returned = sum(a is node for a in node.graph.output_node().args[0])
    return returned == 1 and all(u.op == "output" or u.meta.get(TAG) == tag
                                 for u in node.users)


def _partition_nodes(owner: Owner, tag: str) -> list[torch.fx.Node]:
    """The nodes tagged ``tag``, minus weights that other code needs too (those stay in the
    program and reach the delegate as inputs). A tagged mutable buffer goes into the delegate
    with its write-back when the partition computes it; otherwise it stays in the program."""
    mutations = _mutations(owner)
    nodes = []
    for node in owner.gm.graph.nodes:
        if node.meta.get(TAG) != tag:
            continue
        if node.op == "output":
            raise ExportError(f"the partitioner tagged the output node with {tag!r}; tag only "
                              "the nodes that compute values")
        if node.op == "placeholder":
            spec = owner.input_specs.get(node.name)
            if spec is None or spec.kind not in _CONSUMABLE:
                raise ExportError(
                    f"placeholder %{node.name} is a user input but is tagged {tag!r}; only "
                    "weights, buffers and constants may be tagged (a delegate receives user "
                    "inputs as arguments). Remove the tag from this placeholder.")
            shared = [u.name for u in node.users if u.meta.get(TAG) != tag]
            foreign = (spec.target in owner.ep.graph_signature.buffers_to_mutate.values()
                       and not _owns_mutation(mutations.get(spec.target), tag))
            if shared or foreign:
                why = (f"also used by {shared}" if shared
                       else "a mutable buffer written back outside the partition")
                logger.info("%s stays in the program (%s); the delegate %r gets it as an input",
                            node.name, why, tag)
                continue
        nodes.append(node)
    return nodes


def _arg_of(node: torch.fx.Node):
    if isinstance(node.meta.get("val"), torch.SymInt):
        return SymIntArgument(name=node.name)
    return TensorArgument(name=node.name)


def _sub_program(owner: Owner, sub_gm: torch.fx.GraphModule, consumed: dict[str, InputSpec],
                 written_back: dict[int, str]) -> ExportedProgram:
    """The fused subgraph as an ExportedProgram: weights it owns first, then user inputs;
    outputs ``written_back`` (index -> buffer) are its buffer mutations."""
    placeholders = [n for n in sub_gm.graph.nodes if n.op == "placeholder"]
    # Parameters, buffers, constants, then user inputs, each in graph order, all before the
    # first operator: the graph is rebuilt in that order, as ExecuTorch rebuilds it.
    kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    weights = [n for kind in kinds for n in placeholders
               if n.name in consumed and consumed[n.name].kind == kind]
    users = [n for n in placeholders if n.name not in consumed]
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in weights + users + [n for n in sub_gm.graph.nodes if n.op != "placeholder"]:
        copies[node] = graph.node_copy(node, lambda x: copies[x])
    graph._codegen = sub_gm.graph._codegen
    sub_gm.graph = graph
    weights, users = [copies[n] for n in weights], [copies[n] for n in users]
    input_specs = [consumed[n.name] for n in weights] + [
        InputSpec(InputKind.USER_INPUT, _arg_of(n), None) for n in users]
    outputs = list(graph.output_node().args[0])
    output_specs = [
        OutputSpec(OutputKind.BUFFER_MUTATION, _arg_of(n), written_back[i]) if i in written_back
        else OutputSpec(OutputKind.USER_OUTPUT, _arg_of(n), None)
        for i, n in enumerate(outputs)]
    state_dict = {s.target: owner.weight(s) for s in consumed.values()
                  if s.target in owner.state_dict}
    constants = {s.target: owner.weight(s) for s in consumed.values()
                 if s.target not in owner.state_dict}
    in_spec = pytree.tree_flatten((tuple(n.meta.get("val") for n in users), {}))[1]
    out_spec = pytree.tree_flatten([n.meta.get("val") for n in outputs])[1]
    graph.lint()
    sub_gm.recompile()
    return ExportedProgram(
        root=sub_gm, graph=graph,
        graph_signature=ExportGraphSignature(input_specs=input_specs, output_specs=output_specs),
        state_dict=state_dict, range_constraints=copy.deepcopy(owner.ep.range_constraints),
        module_call_graph=[ModuleCallEntry("", ModuleCallSignature(
            inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec))],
        constants=constants, verifiers=[owner.ep.verifier])


def _fixup_output_node(sub_gm: torch.fx.GraphModule) -> None:
    """The subgraph returns a flat list (a list-valued node opened into its items)."""
    out = sub_gm.graph.output_node()
    result = out.args[0]
    if isinstance(result, torch.fx.Node) and isinstance(result.meta.get("val"), list):
        with sub_gm.graph.inserting_before(out):
            result = [torch.fx.Proxy(result)[i].node for i in range(len(result.meta["val"]))]
    out.args = (pytree.tree_flatten(result)[0],)


def _checked_nodes(owner: Owner, tag: str) -> list[torch.fx.Node] | None:
    """The nodes tagged ``tag`` in order; None when they compute nothing."""
    nodes = topo_sort(_partition_nodes(owner, tag))
    if not any(n.op != "placeholder" for n in nodes):
        logger.debug("no nodes to delegate for tag %r", tag)
        return None
    if not validate_partition(nodes):
        raise ExportError(
            f"the nodes tagged {tag!r} do not form one self-contained subgraph: some "
            "untagged node both depends on a tagged node and feeds another one. Give the two "
            "sides different tags (or tag the node in between too).")
    return nodes


def tagged_program(ep: ExportedProgram, tag: str) -> ExportedProgram | None:
    """What ``to_backend`` would hand the backend for the nodes tagged ``tag`` in ``ep``
    (``ep`` itself is not changed): lets a partitioner try its backend's lowering on a
    proposed partition before committing to it. Buffer write-backs stay outputs here (the
    trial does not take the mutations over)."""
    owner = Owner.of(ep)
    nodes = _checked_nodes(owner, tag)
    if nodes is None:
        return None
    sub_gm, _, outputs = fuse_as_graphmodule(owner.gm, nodes, f"fused_{tag}")
    if not outputs:
        return None
    _fixup_output_node(sub_gm)
    consumed = {n.name: owner.input_specs[n.name] for n in nodes if n.op == "placeholder"}
    return _sub_program(owner, sub_gm, consumed, {})


def fuse_nodes(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], tag: str,
               legalize: bool = True) -> tuple[torch.fx.GraphModule, torch.fx.Node,
                                               list[torch.fx.Node]] | None:
    """Move ``nodes`` (topologically sorted, one self-contained subgraph) of ``gm`` into a
    submodule ``fused_<tag>`` called in their place; returns (the submodule, its
    ``call_module`` node, the nodes whose values left the partition), or None when none
    does. ``getitem``\\ s read the call's results; ``legalize`` re-sorts ``gm`` afterwards as
    ExecuTorch does (torch's ``legalize_graph``, breadth first)."""
    name = f"fused_{tag}"
    sub_gm, inputs, outputs = fuse_as_graphmodule(gm, nodes, name)
    if not outputs:
        return None
    _fixup_output_node(sub_gm)
    insert_subgm(gm, sub_gm, inputs, outputs)
    module_node = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == name)
    if len(outputs) == 1 and isinstance(outputs[0].meta.get("val"), FakeTensor):
        with gm.graph.inserting_after(module_node):
            item = torch.fx.Proxy(module_node)[0].node
            module_node.replace_all_uses_with(item, propagate_meta=True)
            item.args = (module_node, 0)
    for item in module_node.users:  # outputs keep their source's metadata, not its module
        item.meta.pop("nn_module_stack", None)
        item.meta.pop("source_fn_stack", None)
    erase_nodes(gm, nodes)
    if legalize:
        legalize_graph(gm)
    module_node = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == name)
    return sub_gm, module_node, outputs


def lower_tag(owner: Owner, tag: str, spec: DelegationSpec, lower: Lower) -> bool:
    """Replace the nodes tagged ``tag`` by a call to their lowered module. False if none.

    The graph edits are ExecuTorch's, in its order (a ``call_module`` after the last node
    whose value leaves the partition, ``getitem``s, erasure, then torch's ``legalize_graph``
    re-sorting the whole graph breadth first, then the module call becoming
    ``get_attr`` + ``executorch_call_delegate``), so the program's node order, hence the
    ``.pte``, is ExecuTorch's when several partitions are lowered."""
    gm = owner.gm
    nodes = _checked_nodes(owner, tag)
    if nodes is None:
        return False
    fused = fuse_nodes(gm, nodes, tag)
    if fused is None:
        logger.info("tag %r computes nothing the program uses; left undelegated", tag)
        return False
    sub_gm, module_node, outputs = fused
    last = nodes[-1]

    consumed = {n.name: owner.input_specs[n.name] for n in nodes if n.op == "placeholder"}
    written_back = _take_over_mutations(owner, module_node, consumed)
    sub_ep = _sub_program(owner, sub_gm, consumed, written_back)
    lowered = lower(spec.backend_id, sub_ep, list(spec.compile_specs))

    with gm.graph.inserting_before(module_node):
        attr = gm.graph.get_attr(get_lowered_module_name(gm, lowered))
        call = gm.graph.call_function(executorch_call_delegate, (attr, *module_node.args))
    # A write-back the delegate keeps is not one of its results (ExecuTorch's spec
    # propagation runs the sub-program, whose buffer mutations happen in place).
    call.meta["val"] = [o.meta["val"] for i, o in enumerate(outputs) if i not in written_back]
    copy_provenance(last, call)
    module_node.replace_all_uses_with(call)
    gm.graph.erase_node(module_node)
    gm.delete_submodule(f"fused_{tag}")
    # The call's handle is one past those left in the graph, as ExecuTorch numbers it.
    call.meta["debug_handle"] = next_debug_handle(n for n in gm.graph.nodes if n is not call)
    for name in consumed:
        del owner.input_specs[name]
    gm.graph.lint()
    gm.recompile()
    return True


def _written_back(owner: Owner, module_node: torch.fx.Node,
                  consumed: dict[str, InputSpec]) -> dict[int, str]:
    """Delegate output index -> buffer, for the write-backs of buffers the delegate took
    (the program's outputs that are a ``getitem`` of ``module_node``)."""
    owned = {s.target for s in consumed.values() if s.kind == InputKind.BUFFER}
    args = owner.gm.graph.output_node().args[0]
    return {arg.args[1]: spec.target for arg, spec in zip(args, owner.output_specs)
            if spec.kind == OutputKind.BUFFER_MUTATION and spec.target in owned
            and isinstance(arg, torch.fx.Node) and arg.op == "call_function"
            and arg.args and arg.args[0] is module_node}


def _take_over_mutations(owner: Owner, module_node: torch.fx.Node,
                         consumed: dict[str, InputSpec]) -> dict[int, str]:
    """Write-backs of buffers the delegate took: dropped from the program's outputs (with
    their ``getitem``, later ones renumbered) and returned as delegate output index ->
    buffer, ExecuTorch's ``_unsafe_adjust_original_program``."""
    taken = _written_back(owner, module_node, consumed)
    if not taken:
        return {}
    out_node = owner.gm.graph.output_node()
    kept = [(arg, spec) for arg, spec in zip(out_node.args[0], owner.output_specs)
            if not (isinstance(arg, torch.fx.Node) and arg.args and arg.args[0] is module_node
                    and arg.args[1] in taken and spec.kind == OutputKind.BUFFER_MUTATION)]
    out_node.args = (tuple(arg for arg, _ in kept),)
    owner.output_specs = [spec for _, spec in kept]
    for item in list(module_node.users):
        if item.args[1] in taken:
            owner.gm.graph.erase_node(item)
    for item in list(module_node.users):
        index = item.args[1]
        item.args = (module_node, index - sum(1 for i in taken if i < index))
    return taken


def rebuild(owner: Owner) -> ExportedProgram:
    """A new ExportedProgram around the partitioned graph and its updated signature."""
    ep, gm = owner.ep, owner.gm
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    input_specs = [owner.input_specs[name] for name in placeholders]
    outputs = list(gm.graph.output_node().args[0])
    output_specs = []
    for old, arg in zip(owner.output_specs, outputs):
        if isinstance(arg, torch.fx.Node) and isinstance(old.arg, (TensorArgument, SymIntArgument)):
            old = OutputSpec(old.kind, type(old.arg)(name=arg.name), old.target)
        output_specs.append(old)
    used = {s.target for s in input_specs if s.target is not None}
    state_dict = {k: v for k, v in owner.state_dict.items() if k in used}
    constants = {k: v for k, v in owner.constants.items() if k in used}
    for node in gm.graph.nodes:
        node.meta.pop(TAG, None)
    return ExportedProgram(
        root=gm, graph=gm.graph,
        graph_signature=ExportGraphSignature(input_specs=input_specs, output_specs=output_specs),
        state_dict=state_dict, range_constraints=copy.deepcopy(ep.range_constraints),
        module_call_graph=copy.deepcopy(ep.module_call_graph), example_inputs=None,
        constants=constants, verifiers=[ep.verifier])


# ExecuTorch's step-by-step API over the same machinery (``exir.lowered_backend_module``):
# callers that cut a subgraph out by hand (its Vulkan test utilities) use these.

def create_submodule_from_nodes(gm: torch.fx.GraphModule, node_list: list[torch.fx.Node],
                                tag: str, skip_legalize_graph: bool = False,
                                ) -> tuple[torch.fx.GraphModule, torch.fx.Node]:
    """Move ``node_list`` (one self-contained subgraph) of ``gm`` into a submodule, in place;
    returns the submodule and the ``call_module`` node that now calls it."""
    nodes = topo_sort(list(node_list))
    if not validate_partition(nodes):
        raise ExportError(f"the nodes given for {tag!r} do not form one self-contained "
                          "subgraph: an outside node both uses one of them and feeds another")
    fused = fuse_nodes(gm, nodes, tag, legalize=not skip_legalize_graph)
    if fused is None:
        raise ExportError(f"the nodes given for {tag!r} compute nothing the graph uses")
    return fused[0], fused[1]


def create_exported_program_from_submodule(
        submodule: torch.fx.GraphModule, owning_program: ExportedProgram, tag: str,
        call_module_node: torch.fx.Node, is_submodule: bool,
) -> tuple[ExportedProgram, dict[str, InputSpec], dict[str, OutputSpec]]:
    """The submodule as an ExportedProgram holding the weights tagged ``tag`` (placeholders
    carrying the tag), and the input and output specs of ``owning_program`` it took over:
    those weights, and the write-backs of buffers it computes. Inside a control-flow
    submodule (``is_submodule``) nothing is taken over."""
    owner = Owner.of(owning_program)
    consumed = {} if is_submodule else {
        n.name: owner.input_specs[n.name] for n in submodule.graph.nodes
        if n.op == "placeholder" and n.meta.get(TAG) == tag and n.name in owner.input_specs
        and owner.input_specs[n.name].kind in _CONSUMABLE}
    written_back = _written_back(owner, call_module_node, consumed)
    outputs = owner.gm.graph.output_node().args[0]
    taken_outputs = {arg.name: spec for arg, spec in zip(outputs, owner.output_specs)
                     if isinstance(arg, torch.fx.Node) and arg.args
                     and arg.args[0] is call_module_node and arg.args[1] in written_back}
    return _sub_program(owner, submodule, consumed, written_back), consumed, taken_outputs
