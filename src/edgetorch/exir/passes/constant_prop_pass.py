"""``constant_prop_pass`` (ExecuTorch's ``exir.passes.constant_prop_pass``): every value the
graph computes from weights and constants alone is computed now.

Walking the graph in order, a call whose arguments are all constants (weights, constant
buffers, lifted constants, values already computed, Python scalars) is run on them. Then,
from the last such value back, each one something else still reads becomes a lifted constant
``_prop_tensor_constant<N>`` (N: the number of constants the program holds at that moment,
as ExecuTorch numbers them) placed before the first user input, and the values and weights
only other constants read are dropped. A graph output that became a constant is returned
through a ``clone`` (an output is no constant). Whatever its size -- ``to_executorch``'s own
folding (``constant_fold.py``) only takes folds that do not grow the file.

Not computed: ``memory.alloc``, Edge ``full`` and the Edge forms of the quantization
primitives (``dequantize_per_tensor``... : backends match them around weights) unless
``custom_skip_targets`` says otherwise, random or mutating operators, and anything inside
control flow (a warning says so)."""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch
from torch._guards import detect_fake_mode
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument
from torch.utils import _pytree as pytree

from .. import memory
from ..dialects._ops import ops as exir_ops
from ..dialects.edge._ops import EdgeOpOverload
from ..signature import constant_placeholders, placeholder_infos
from .convert_constant_dim_order_pass import needs_contiguous_copy

logger = logging.getLogger(__name__)

PREFIX = "_prop_tensor_constant"
# ExecuTorch's _QUANT_PRIMITIVES, by name (their libraries load with quantization only)
QUANT_PRIMITIVES = frozenset({
    "quantized_decomposed::dequantize_per_channel.default",
    "quantized_decomposed::dequantize_per_tensor.default",
    "quantized_decomposed::dequantize_per_tensor.tensor",
    "quantized_decomposed::convert_element_type.no_fuse",
    "quantized_decomposed::quantize_per_tensor.default",
    "quantized_decomposed::quantize_per_tensor.tensor",
    "quantized_decomposed::quantize_per_channel.default",
    "quantized_decomposed::choose_qparams.tensor",
    "torchao::dequantize_affine.default",
    "torchao::quantize_affine.default",
    "torchao::choose_qparams_affine.default",
})
_RANDOM = frozenset({"aten::rand", "aten::randn", "aten::bernoulli", "aten::native_dropout",
                     "aten::randint", "aten::randperm", "aten::normal", "aten::uniform"})
_SCALARS = (bool, int, float, str, torch.device, torch.dtype, torch.layout,
            torch.memory_format, type(None))


def _skipped_by_default(target: object) -> bool:
    if not isinstance(target, EdgeOpOverload):  # ExecuTorch's defaults are Edge operators
        return False
    return (target == exir_ops.edge.aten.full.default
            or f"{target._schema.name}.{target._overloadname}" in QUANT_PRIMITIVES)


def _computable(node: torch.fx.Node, skip: set | None) -> bool:
    if node.op != "call_function" or node.target is memory.alloc:
        return False
    if skip is None and _skipped_by_default(node.target):
        return False
    if skip is not None and node.target in skip:
        return False
    if isinstance(node.target, OpOverload):
        schema = node.target._schema
        return not (schema.is_mutable or schema.name in _RANDOM)
    return node.target is operator.getitem


def _is_constant(arg: Any, values: dict[torch.fx.Node, Any]) -> bool:
    leaves = pytree.tree_leaves((arg,))
    return all(leaf in values if isinstance(leaf, torch.fx.Node)
               else isinstance(leaf, (*_SCALARS, torch.Tensor)) for leaf in leaves)


def _propagate(ep: ExportedProgram, skip: set | None) -> dict[torch.fx.Node, Any]:
    """Every node whose value is known now -> that value (placeholders first, graph order)."""
    values: dict[torch.fx.Node, Any] = dict(constant_placeholders(ep))
    for node in ep.graph.nodes:
        if not _computable(node, skip) or not _is_constant((node.args, node.kwargs), values):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
        with torch.no_grad():
            value = node.target(*args, **kwargs)
        if isinstance(value, torch.Tensor):
            values[node] = value.contiguous() if needs_contiguous_copy(value) else value
        elif isinstance(value, (tuple, list)) and all(u.target is operator.getitem
                                                       for u in node.users):
            values[node] = value  # a multi-result op whose results are read one by one
    return values


def _new_name(ep: ExportedProgram) -> str:
    name = f"{PREFIX}{len(ep.constants)}"
    if name in ep.constants:
        taken = [int(k[len(PREFIX):]) for k in ep.constants
                 if k.startswith(PREFIX) and k[len(PREFIX):].isdigit()]
        name = f"{PREFIX}{max(taken, default=-1) + 1}"
    return name


def _erase_weight(ep: ExportedProgram, node: torch.fx.Node, target: str | None) -> None:
    if target is not None:
        ep.state_dict.pop(target, None)
        ep.constants.pop(target, None)
    ep.graph.erase_node(node)


def _materialize(ep: ExportedProgram, values: dict[torch.fx.Node, Any]) -> dict[str, InputSpec]:
    """Turn the values something still reads into lifted constants, drop the rest; the new
    placeholders' input specs by name."""
    graph = ep.graph
    targets = {node: info.fqn for node, info in placeholder_infos(ep).items()}
    first_user_input = next((n for n in graph.nodes if n.op == "placeholder"
                             and n.name in ep.graph_signature.user_inputs), None)
    fake_mode = detect_fake_mode([n.meta.get("val") for n in graph.find_nodes(op="placeholder")])
    specs: dict[str, InputSpec] = {}
    for node, value in reversed(list(values.items())):
        if all(user in values for user in node.users):
            _erase_weight(ep, node, targets.get(node))
            continue
        if node.op == "placeholder":
            continue
        name = _new_name(ep)
        ep.constants[name] = value
        if first_user_input is not None:
            with graph.inserting_before(first_user_input):
                placeholder = graph.placeholder(name)
        else:
            last = list(graph.find_nodes(op="placeholder"))
            with graph.inserting_after(last[-1] if last else None):
                placeholder = graph.placeholder(name)
        placeholder.meta.update(node.meta)
        placeholder.meta.pop("nn_module_stack", None)  # placeholders belong to no module
        if fake_mode is not None:
            placeholder.meta["val"] = fake_mode.from_tensor(value, static_shapes=True)
            placeholder.meta["val"].constant = value
        node.replace_all_uses_with(placeholder)
        graph.erase_node(node)
        specs[placeholder.name] = InputSpec(InputKind.CONSTANT_TENSOR,
                                            TensorArgument(placeholder.name), name,
                                            persistent=True)
    return specs


def _clone_constant_outputs(ep: ExportedProgram, skip_dim_order: bool) -> None:
    constants = constant_placeholders(ep)
    output = ep.graph.output_node()
    outs = list(output.args[0])
    clone = (exir_ops.edge.aten.clone.default if skip_dim_order
             else exir_ops.edge.dim_order_ops._clone_dim_order.default)
    for i, (out, spec) in enumerate(zip(outs, ep.graph_signature.output_specs)):
        if out not in constants:
            continue
        with ep.graph.inserting_after(out):
            outs[i] = ep.graph.call_function(clone, (out,))
        outs[i].meta["val"] = out.meta["val"]
        spec.arg = TensorArgument(outs[i].name)
    output.args = (outs,)


def constant_prop_pass(exported_program: ExportedProgram,
                       custom_skip_targets: set | None = None,
                       _skip_dim_order: bool = True) -> ExportedProgram:
    """Compute ``exported_program``'s constant values in place (see the module) and return
    it; ``custom_skip_targets``: the operators never computed (replaces the default set)."""
    ep = exported_program
    if not ep.graph.find_nodes(op="placeholder"):
        return ep
    if ep.graph.find_nodes(op="call_function", target=torch.ops.higher_order.cond):
        logger.warning("constant_prop_pass does not constant propagate in control flow modules")
    values = _propagate(ep, None if custom_skip_targets is None else set(custom_skip_targets))
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    specs.update(_materialize(ep, values))
    ep.graph_signature.input_specs[:] = [specs[n.name]
                                         for n in ep.graph.find_nodes(op="placeholder")]
    _clone_constant_outputs(ep, _skip_dim_order)
    ep.graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep
