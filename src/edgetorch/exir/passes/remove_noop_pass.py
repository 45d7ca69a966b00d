"""Operators that hand back their input unchanged go (ExecuTorch's
``exir.passes.remove_noop_pass``): a ``slice_copy`` keeping the whole tensor, a ``_to_copy``
changing no dtype, device, size or stride, ``to.dtype``/``dropout`` whose value is their
input's, and ``alias_copy``. When such an operator sat between a ``dequantize`` and a
``quantize`` with the same parameters, the pair goes too (``dq -> q`` is the input itself).

``to_edge`` runs ``remove_noops``; ``RemoveNoopPass`` and ``RemoveToCopyPass`` are the same
rules as user passes (ATen or Edge operators alike)."""

from __future__ import annotations

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassResult

from ..pass_base import ExportPass
from .rewrite import erase, rewrite

# By name: the quantized_decomposed library registers these only when quantization is imported.
_DEQUANTIZE = {"quantized_decomposed::dequantize_per_tensor",
               "quantized_decomposed::dequantize_per_channel"}
_QUANTIZE = {"quantized_decomposed::quantize_per_tensor",
             "quantized_decomposed::quantize_per_channel"}

NOOP_OPS = (torch.ops.aten.to.dtype, torch.ops.aten.dropout.default,
            torch.ops.aten.slice_copy.Tensor)
TO_COPY_OPS = (torch.ops.aten._to_copy.default,)


def _is_default_of(node: object, names: set[str]) -> bool:
    target = getattr(node, "target", None)
    return (isinstance(target, OpOverload) and target._overloadname == "default"
            and target._schema.name in names)


def _static_shape(val: object) -> tuple[int, ...] | None:
    if isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape):
        return tuple(val.shape)
    return None


def is_noop(node: torch.fx.Node) -> bool:
    """Whether ``node`` (a ``slice_copy``, ``_to_copy``, ``to.dtype`` or ``dropout``) returns
    its first argument's value."""
    src = node.args[0] if node.args else None
    before, after = (src.meta.get("val") if isinstance(src, torch.fx.Node) else None,
                     node.meta.get("val"))
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)):
        return False
    if before is after:  # traced as returning its input (to.dtype to the same dtype)
        return True
    if node.target == torch.ops.aten.slice_copy.Tensor:
        # sizes compared only where both sides are static (a data-dependent slice is not)
        return _static_shape(before) is not None and _static_shape(before) == _static_shape(after)
    if node.target == torch.ops.aten._to_copy.default:
        return (before.dtype == after.dtype and before.device == after.device
                and before.shape == after.shape and before.stride() == after.stride())
    return False


def _drop_dequantize_quantize(dequantize: torch.fx.Node) -> None:
    for user in list(dequantize.users):
        if _is_default_of(user, _QUANTIZE) and list(user.args[1:]) == list(dequantize.args[1:]):
            user.replace_all_uses_with(dequantize.args[0])


def remove_noop_nodes(gm: torch.fx.GraphModule, targets: tuple) -> bool:
    """Route the readers of every no-op call of ``targets`` in ``gm``'s own graph to its
    input, and drop it."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in targets or not is_noop(node):
            continue
        src = node.args[0]
        node.replace_all_uses_with(src)
        gm.graph.erase_node(node)
        changed = True
        if _is_default_of(src, _DEQUANTIZE):
            _drop_dequantize_quantize(src)
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


def remove_noops(ep: ExportedProgram) -> bool:
    """``to_edge``'s form: ``alias_copy`` everywhere, whole-tensor ``slice_copy`` and
    no-change ``_to_copy`` in the top graph (as ExecuTorch's ``to_edge``)."""
    changed = rewrite(ep.graph_module, {
        torch.ops.aten.alias_copy.default: lambda node: erase(node, node.args[0])})
    return remove_noop_nodes(ep.graph_module, NOOP_OPS + TO_COPY_OPS) or changed


class _RemoveNoops(ExportPass):
    OPS: tuple = ()  # the operators whose no-op calls go

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = remove_noop_nodes(graph_module, self.OPS)
        if graph_module.graph.eliminate_dead_code():
            graph_module.recompile()
            changed = True
        return PassResult(graph_module, changed)


class RemoveNoopPass(_RemoveNoops):
    """Remove ``to.dtype``, ``dropout`` and ``slice_copy`` calls that return their input
    (with a ``dequantize``/``quantize`` pair of equal parameters around them)."""

    OPS = NOOP_OPS


class RemoveToCopyPass(_RemoveNoops):
    """Remove ``_to_copy`` calls that change no dtype, device, size or stride."""

    OPS = TO_COPY_OPS
