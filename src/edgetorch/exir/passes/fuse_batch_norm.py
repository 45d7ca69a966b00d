"""BatchNorm folded into the convolution before it, ahead of time (portable programs).

An inference BatchNorm (``_native_batch_norm_legit_no_training``) whose input is a
convolution read by nothing else is an affine map per output channel: it rides on the
convolution's weights (:func:`fold_conv_bn_weights`, torch's ``fuse_conv_bn_weights``, which
XNNPACK's preprocess uses for the nodes it lowers too), and the program carries one
convolution instead of two operators and a BatchNorm-sized intermediate. Folding rounds the
weights once in float32, like ExecuTorch's ``FuseBatchNormPass``: results agree with eager
PyTorch within float tolerance.

It applies when the graph allows: the weight, bias and the BatchNorm's statistics and affine
parameters are constants, float32 or float64, and only the BatchNorm's normalised output is
used (not its saved statistics). The runtime folds the same pairs at load for programs built
elsewhere (``runtime/optimize/batch_norm.py``). ``ExecutorchBackendConfig(fuse_batch_norm=
False)`` keeps them, as ExecuTorch's ``to_executorch`` does.
"""

from __future__ import annotations

from operator import getitem

import torch
from torch.export import ExportedProgram
from torch.nn.utils.fusion import fuse_conv_bn_weights

from ..signature import constant_placeholders
from .constant_fold import _remove_constant, add_constant

aten = torch.ops.aten
CONV = aten.convolution.default
BATCH_NORM = aten._native_batch_norm_legit_no_training.default
_FLOATS = (torch.float32, torch.float64)


def bn_scale_shift(mean: torch.Tensor, var: torch.Tensor, eps: float,
                   gamma: torch.Tensor | None, beta: torch.Tensor | None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """``y = x * scale + shift`` per channel of an inference BatchNorm, in float64 (as
    ExecuTorch's DecomposeBatchNorm, eps included as a float32 number)."""
    gamma = gamma.double() if gamma is not None else torch.ones(1, dtype=torch.float64)
    beta = beta.double() if beta is not None else torch.zeros(1, dtype=torch.float64)
    denom = torch.sqrt(var.double() + torch.tensor([eps], dtype=torch.float32))
    return gamma / denom, -mean.double() * gamma / denom + beta


def fold_conv_bn_weights(weight: torch.Tensor, bias: torch.Tensor | None, mean: torch.Tensor,
                         var: torch.Tensor, eps: float, gamma: torch.Tensor | None,
                         beta: torch.Tensor | None, transposed: bool, groups: int
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias of ``batch_norm(convolution(x, weight, bias))`` as one convolution.
    (Shared with XNNPACK's preprocess.)"""
    if not (transposed and groups > 1):  # torch's helper scales one group's outputs only
        return fuse_conv_bn_weights(weight, bias, mean, var, eps, gamma, beta, transposed)
    scale, shift = bn_scale_shift(mean, var, eps, gamma, beta)
    cin = weight.shape[0]
    w5 = weight.double().reshape(groups, cin // groups, *weight.shape[1:])
    weight = (w5 * scale.reshape(groups, 1, -1, *[1] * (weight.dim() - 2))).reshape(weight.shape)
    bias = (bias.double() if bias is not None else 0) * scale + shift
    return weight.float(), bias.float()


def fuse_batch_norm(ep: ExportedProgram) -> bool:
    """Fold every foldable convolution + BatchNorm pair of ``ep``; whether any was."""
    graph = ep.graph
    consts = constant_placeholders(ep)
    changed = False
    for bn in list(graph.nodes):
        if bn.op != "call_function" or bn.target != BATCH_NORM:
            continue
        conv = bn.args[0]
        item = _normalised_output(bn)
        if not isinstance(conv, torch.fx.Node) or conv.target != CONV or \
                len(conv.users) != 1 or item is None:
            continue
        params = _params(conv, bn, consts)
        if params is None:
            continue
        x, w, b, stride, padding, dilation, transposed, output_padding, groups = conv.args
        weight, bias = fold_conv_bn_weights(*params, bool(transposed), int(groups))
        dtype = params[0].dtype
        weight, bias = weight.detach().to(dtype), bias.detach().to(dtype)
        new_w = add_constant(ep, f"_folded_{conv.name}_weight", weight.contiguous(),
                             _fake(w.meta["val"], weight), conv)
        new_b = add_constant(ep, f"_folded_{conv.name}_bias", bias.contiguous(),
                             _fake(w.meta["val"], bias), conv)
        conv.args = (x, new_w, new_b, stride, padding, dilation, transposed, output_padding,
                     groups)
        item.replace_all_uses_with(conv)
        old = {w, b, *bn.args[1:5]}
        for user in list(bn.users):
            graph.erase_node(user)
        graph.erase_node(bn)
        for dead in old:
            if isinstance(dead, torch.fx.Node) and dead in consts and not dead.users:
                _remove_constant(ep, dead)
                consts.pop(dead)
        changed = True
    if changed:
        graph.lint()
        ep.graph_module.recompile()
    return changed


def _normalised_output(bn: torch.fx.Node) -> torch.fx.Node | None:
    """The ``getitem(bn, 0)`` that reads the normalised output, when nothing else of the
    BatchNorm is used."""
    items = list(bn.users)
    if any(u.target is not getitem for u in items):
        return None
    used = [u for u in items if u.users]
    if len(used) != 1 or used[0].args[1] != 0:
        return None
    return used[0]


def _params(conv: torch.fx.Node, bn: torch.fx.Node, consts: dict[torch.fx.Node, torch.Tensor]
            ) -> tuple | None:
    """(weight, bias, mean, var, eps, gamma, beta) as tensors, or None when one is not a
    float constant or the shapes do not fit."""
    def const(node: object, optional: bool) -> torch.Tensor | None | bool:
        if node is None:
            return None if optional else False
        v = consts.get(node) if isinstance(node, torch.fx.Node) else None
        return v if v is not None and v.dtype in _FLOATS else False

    w, b = const(conv.args[1], False), const(conv.args[2], True)
    gamma, beta, mean, var = (const(bn.args[i], i in (1, 2)) for i in (1, 2, 3, 4))
    if any(v is False for v in (w, b, gamma, beta, mean, var)):
        return None
    channels = w.shape[1] * int(conv.args[8]) if conv.args[6] else w.shape[0]
    if any(v is not None and v.shape != (channels,) for v in (b, gamma, beta, mean, var)):
        return None
    return w, b, mean, var, float(bn.args[6]), gamma, beta


def _fake(like: object, value: torch.Tensor) -> object:
    """A meta value for a new constant of ``value``'s shape, from the fake mode of ``like``."""
    mode = getattr(like, "fake_mode", None)
    if mode is None:
        return value
    with mode:
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype)
