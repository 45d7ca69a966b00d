"""``ScalarToTensorPass``: a Python scalar given where the operator's schema says ``Tensor``
becomes a constant tensor (ExecuTorch's ``exir.passes.ScalarToTensorPass``)."""

from __future__ import annotations

from typing import Any

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from ..node_meta import copy_provenance
from ..pass_base import ExportPass, PassResult, map_args


class ScalarToTensorPass(ExportPass):
    def __init__(self) -> None:
        super().__init__()
        self._modified = False

    def call_operator(self, op: Any, args: tuple, kwargs: dict, meta: Any) -> Any:
        if getattr(op, "_schema", None) is not None:
            args, kwargs = map_args(op, self._tensor_if_needed, args, kwargs)
        return super().call_operator(op, args, kwargs, meta)

    def _tensor_if_needed(self, value: Any, arg: Any) -> Any:
        if isinstance(value, (bool, int, float)) and isinstance(arg.type, torch.TensorType):
            self._modified = True
            # A real constant, not a fake tensor of the tracing mode.
            with torch.utils._python_dispatch._disable_current_modes():
                return torch.tensor(value)
        return value

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self._modified = False
        result = super().call(graph_module)
        return PassResult(result.graph_module, self._modified)


def _mixes_with_a_non_contiguous_tensor(node: torch.fx.Node) -> bool:
    """True when the node reads or writes a tensor whose dim order is not contiguous
    (channels-last). ExecuTorch's portable elementwise kernels require every tensor operand to
    share one dim order (``tensors_have_same_dim_order``): a 0-d constant's order counts as
    contiguous, never channels-last, so ``mul.Tensor(x_channels_last, tensor(2.0))`` fails
    there with InvalidArgument -- ExecuTorch 1.5.1's own export of ``relu(x) * 2.0`` on a
    channels-last input does not run in its runtime. Such nodes keep the number
    (``edge.scalars_to_scalar_overloads`` calls the ``.Scalar`` overload, which checks only
    the tensor and the output)."""
    from ..ops import scalar_overload
    from ..tensor import dim_order_of

    if scalar_overload(node.target) is None:
        return False
    vals = [node.meta.get("val")]
    vals += [a.meta.get("val") for a in node.all_input_nodes]
    return any(isinstance(v, torch.Tensor) and v.dim() > 0
               and tuple(dim_order_of(v)) != tuple(range(v.dim())) for v in vals)


def lift_scalar_arguments(ep: ExportedProgram) -> bool:
    """``to_edge``'s form of the pass (ExecuTorch's ``ScalarToTensorPass`` followed by its
    ``lift_constant_tensor_pass``), on the top graph: every Python number given where the
    schema says ``Tensor`` (``add.Tensor(x, 1)``, ``sub.Tensor(1.0, x)``) becomes a 0-d
    ``torch.tensor(value)`` (int64, the default float dtype or bool: the value's own type,
    not the other operand's; ``RemoveMixedTypeOperators`` casts it where needed), lifted as
    ExecuTorch lifts it: a persistent buffer ``_lifted_tensor_constant<N>`` (N counts the
    buffers before it), placed before the first user input, in the order of the graph.

    Nested graphs (``cond`` branches, ``map`` bodies) keep their scalars, and so do operators
    on channels-last tensors (ExecuTorch's runtime could not run them lifted): see
    ``edge.scalars_to_scalar_overloads``."""
    graph = ep.graph
    lifted: list[tuple[torch.fx.Node, str | int, torch.Tensor]] = []
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        if _mixes_with_a_non_contiguous_tensor(node):
            continue
        for i, arg in enumerate(node.target._schema.arguments):
            if arg.name in node.kwargs:
                key: str | int = arg.name
                value = node.kwargs[arg.name]
            elif not arg.kwarg_only and i < len(node.args):
                key, value = i, node.args[i]
            else:
                continue
            if isinstance(value, (bool, int, float)) and isinstance(arg.type, torch.TensorType):
                lifted.append((node, key, torch.tensor(value)))
    if not lifted:
        return False
    specs = list(ep.graph_signature.input_specs)
    first_user = next((i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT), None)
    anchor = next((n for n in graph.nodes if n.op == "placeholder"
                   and first_user is not None and n.name == specs[first_user].arg.name), None)
    n_buffers = len(ep.graph_signature.buffers)
    new_specs = []
    for node, key, value in lifted:
        fqn = f"_lifted_tensor_constant{n_buffers + len(new_specs)}"
        if anchor is not None:
            with graph.inserting_before(anchor):
                placeholder = graph.placeholder(fqn)
        else:  # no user input: the constants go first, as ExecuTorch puts them
            with graph.inserting_before(next(iter(graph.nodes), None)):
                placeholder = graph.placeholder(fqn)
        placeholder.meta["val"] = value
        copy_provenance(node, placeholder)
        placeholder.meta.pop("nn_module_stack", None)  # placeholders belong to no module
        if isinstance(key, int):
            args = list(node.args)
            args[key] = placeholder
            node.args = tuple(args)
        else:
            node.kwargs = {**node.kwargs, key: placeholder}
        new_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(placeholder.name), fqn,
                                   persistent=True))
        ep.state_dict[fqn] = value
    at = first_user if first_user is not None else 0
    ep.graph_signature.input_specs[:] = specs[:at] + new_specs + specs[at:]
    ep.graph_module.recompile()
    return True
