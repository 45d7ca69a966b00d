"""Elementwise and shape operators -> XNNPACK nodes (see ``aot.builder`` for layouts).

Elementwise operators run in the layout their input already has; shape operators that name a
dimension (slice, cat, pad, permute) translate it when their input is NHWC; reshapes and
softmax work on the tensor's own order (NCHW). What each becomes follows ExecuTorch 1.5's
node visitors (``backends/xnnpack/operators``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.export import ExportedProgram

from .. import schema as x
from .builder import (
    INF,
    NCHW,
    NHWC,
    PERM_NHWC_TO_NCHW,
    Builder,
    dynamic_dims,
    dynamic_reason,
    permuted,
    rule,
    shape_of,
    sole_user,
)

aten = torch.ops.aten
Node = torch.fx.Node


def arg(node: Node, index: int, name: str, default: Any = None) -> Any:
    """Argument ``index`` (or keyword ``name``) of ``node``."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _nhwc_dim(dim: int) -> int:
    """Where logical dimension ``dim`` of a 4-D tensor sits in its NHWC copy."""
    return PERM_NHWC_TO_NCHW[dim]


# ---- activations (a clamp XNNPACK can fuse into the producer's output range) --------------


def activation_bounds(node: Node) -> tuple[float, float] | None:
    """The output range of a relu/hardtanh/clamp node, else None."""
    if node.target == aten.relu.default:
        return (0.0, INF)
    if node.target == aten.hardtanh.default:
        return (float(arg(node, 1, "min_val", -1.0)), float(arg(node, 2, "max_val", 1.0)))
    if node.target == aten.clamp.default:
        lo, hi = arg(node, 1, "min"), arg(node, 2, "max")
        return (-INF if lo is None else float(lo), INF if hi is None else float(hi))
    return None


def fused_activation(g: Builder, node: Node) -> tuple[Node, tuple[float, float] | None]:
    """If ``node``'s only user is a relu/hardtanh/clamp, take it over: returns the node
    whose value the fused op produces and the output range (as ExecuTorch's
    FuseActivationPass does for conv, linear, add, sub and mul)."""
    user = sole_user(node)
    bounds = activation_bounds(user) if user is not None else None
    if user is None or bounds is None:
        return node, None
    g.done.add(user)
    return user, bounds


def _check_clamp(node: Node, ep: ExportedProgram) -> str | None:
    lo, hi = activation_bounds(node)  # type: ignore[misc]
    if lo > hi:
        return f"the clamp range [{lo}, {hi}] is empty"
    return None


@rule(aten.relu.default, aten.hardtanh.default, aten.clamp.default, check=_check_clamp)
def _clamp(g: Builder, node: Node) -> None:
    inp = node.args[0]
    nhwc = g.home(inp)
    g.add(x.XNNClamp(g.get(inp, nhwc), g.out(node, nhwc)), activation_bounds(node))


UNARY = {
    aten.abs.default: x.XNNAbs,
    aten.ceil.default: x.XNNCeiling,
    aten.cos.default: x.XNNCos,
    aten.exp.default: x.XNNExp,
    aten.floor.default: x.XNNFloor,
    aten.gelu.default: x.XNNGelu,
    aten.hardswish.default: x.XNNHardswish,
    aten.log.default: x.XNNLog,
    aten.neg.default: x.XNNNegate,
    aten.rsqrt.default: x.XNNReciprocalSquareRoot,
    aten.sigmoid.default: x.XNNSigmoid,
    aten.sin.default: x.XNNSin,
    aten.sqrt.default: x.XNNSquareRoot,
    aten.tanh.default: x.XNNTanh,
    aten.pow.Tensor_Scalar: x.XNNSquare,
}


def _check_unary(node: Node, ep: ExportedProgram) -> str | None:
    if node.target == aten.gelu.default and arg(node, 1, "approximate", "none") != "none":
        return "XNNPACK's GELU is the exact (erf) one; approximate='tanh' is not supported"
    if node.target == aten.pow.Tensor_Scalar and arg(node, 1, "exponent") not in (2, 2.0):
        return f"only the power 2 (square) is supported, not {arg(node, 1, 'exponent')}"
    return None


@rule(*UNARY, check=_check_unary)
def _unary(g: Builder, node: Node) -> None:
    inp = node.args[0]
    nhwc = g.home(inp)
    g.add(UNARY[node.target](g.get(inp, nhwc), g.out(node, nhwc)))


def _check_elu(node: Node, ep: ExportedProgram) -> str | None:
    if arg(node, 2, "scale", 1) != 1 or arg(node, 3, "input_scale", 1) != 1:
        return "XNNPACK's ELU has no scale / input_scale (they must be 1)"
    return None


@rule(aten.elu.default, check=_check_elu)
def _elu(g: Builder, node: Node) -> None:
    inp = node.args[0]
    nhwc = g.home(inp)
    alpha = float(arg(node, 1, "alpha", 1.0))
    g.add(x.XNNELU(alpha, g.get(inp, nhwc), g.out(node, nhwc)))


@rule(aten.leaky_relu.default)
def _leaky_relu(g: Builder, node: Node) -> None:
    inp = node.args[0]
    nhwc = g.home(inp)
    slope = float(arg(node, 1, "negative_slope", 0.01))
    g.add(x.XNNLeakyReLU(slope, g.get(inp, nhwc), g.out(node, nhwc)))


# ---- binary elementwise -------------------------------------------------------------------

BINARY = {
    aten.add.Tensor: x.XNNAdd,
    aten.add.Scalar: x.XNNAdd,
    aten.sub.Tensor: x.XNNSubtract,
    aten.sub.Scalar: x.XNNSubtract,
    aten.mul.Tensor: x.XNNMultiply,
    aten.mul.Scalar: x.XNNMultiply,
    aten.div.Tensor: x.XNNDiv,
    aten.div.Scalar: x.XNNDiv,
    aten.maximum.default: x.XNNMaximum,
    aten.minimum.default: x.XNNMinimum,
}
_FUSES_ACTIVATION = {x.XNNAdd, x.XNNSubtract, x.XNNMultiply}


def _check_binary(node: Node, ep: ExportedProgram) -> str | None:
    if node.target in (aten.add.Tensor, aten.sub.Tensor, aten.add.Scalar, aten.sub.Scalar):
        alpha = arg(node, 2, "alpha", 1)
        if not isinstance(alpha, (int, float)) or not math.isclose(alpha, 1.0):
            return f"alpha={alpha} (XNNPACK adds and subtracts with alpha 1 only)"
    other = node.args[1]
    if not isinstance(other, (Node, int, float)) or isinstance(other, bool):
        return f"the second operand {other!r} is neither a tensor nor a number"
    return None


def _numel(node: Node) -> int:
    return math.prod(shape_of(node))


@rule(*BINARY, check=_check_binary)
def _binary(g: Builder, node: Node) -> None:
    operands = node.args[:2]
    tensors = [a for a in operands if isinstance(a, Node)]
    # NHWC when every tensor with more than one element is 4-D (broadcasting then commutes
    # with the permutation) and a computed operand already is NHWC.
    nhwc = (len(shape_of(node)) == 4
            and all(len(shape_of(t)) == 4 or _numel(t) == 1 for t in tensors)
            and any(g.home(t) == NHWC for t in tensors if g.static(t) is None))

    def value(a: Any) -> int:
        if not isinstance(a, Node):
            return g.scalar(a)
        return g.get(a, nhwc and len(shape_of(a)) == 4)

    a, b = value(operands[0]), value(operands[1])
    cls = BINARY[node.target]
    tail, bounds = fused_activation(g, node) if cls in _FUSES_ACTIVATION else (node, None)
    out = g.out(tail, nhwc)
    g.add(cls(a, b, out), bounds)


# ---- softmax ------------------------------------------------------------------------------


def _check_softmax(node: Node, ep: ExportedProgram) -> str | None:
    rank = len(shape_of(node))
    dim = node.args[1] % max(rank, 1)
    if arg(node, 2, "half_to_float", False):
        return "half_to_float is not supported"
    if dim != rank - 1 and not (rank == 4 and dim == 1):
        return (f"softmax over dim {node.args[1]} of a rank-{rank} tensor (XNNPACK's softmax "
                "runs over the innermost dimension)")
    return None


@rule(aten._softmax.default, check=_check_softmax)
def _softmax(g: Builder, node: Node) -> None:
    inp = node.args[0]
    rank = len(shape_of(node))
    nhwc = rank == 4 and node.args[1] % rank == 1  # the channel dimension is innermost in NHWC
    g.add(x.XNNSoftmax(g.get(inp, nhwc), g.out(node, nhwc)))


# ---- no-ops: copies, dim-order changes, expansions to the same shape ---------------------


def _check_same_shape(node: Node, ep: ExportedProgram) -> str | None:
    src = node.args[0]
    if not isinstance(src, Node) or list(src.meta["val"].shape) != list(node.meta["val"].shape):
        return "only an expand to the input's own shape (a no-op) is supported"
    val, src_val = node.meta["val"], src.meta["val"]
    if val.dtype != src_val.dtype:
        return f"it converts {src_val.dtype} to {val.dtype} (XNNPACK only changes dim order)"
    if node.target in _ORDER_KEEPING_COPIES and _layout(val) != _layout(src_val):
        # ExecuTorch 1.5.1's partitioner (CloneConfig, CloneDimOrderConfig) keeps these out.
        return "a clone that changes the dim order (only dim-order preserving clones are taken)"
    return None


def _layout(val: torch.Tensor) -> bool:
    """Channels-last or not, as the tensor lies in memory at run time: a view's strides in the
    graph's metadata stand for a contiguous ``*_copy`` result."""
    return val.dim() == 4 and tuple(val.dim_order()) == (0, 2, 3, 1)


_ORDER_KEEPING_COPIES = (aten.clone.default, torch.ops.dim_order_ops._clone_dim_order.default)


@rule(aten.clone.default, aten.expand_copy.default, aten.alias_copy.default,
      torch.ops.dim_order_ops._clone_dim_order.default,
      torch.ops.dim_order_ops._to_dim_order_copy.default, check=_check_same_shape)
def _identity(g: Builder, node: Node) -> None:
    """A copy is the same tensor inside the delegate; a changed dim order only matters at the
    delegate's boundary, where the builder gives each output the layout of its dim order."""
    g.alias(node, node.args[0])


# ---- reshapes -----------------------------------------------------------------------------


def _check_reshape(node: Node, ep: ExportedProgram) -> str | None:
    if len(dynamic_dims(node)) > 1:
        return (f"a reshape to {list(node.meta['val'].shape)}: XNNPACK infers at most one "
                "dynamic dimension")
    return None


@rule(aten.view_copy.default, aten.squeeze_copy.dim, aten.squeeze_copy.dims,
      aten.squeeze_copy.default, aten.unsqueeze_copy.default, check=_check_reshape)
def _reshape(g: Builder, node: Node) -> None:
    g.put(node, g.reshape(g.get(node.args[0], NCHW), node), NCHW)


@rule(aten.permute_copy.default)
def _permute(g: Builder, node: Node) -> None:
    """Reads the input in whichever layout it has: from NHWC, the transpose to NCHW and the
    permutation become one transpose (or none)."""
    inp = node.args[0]
    rank = len(shape_of(inp))
    perm = [d % rank for d in node.args[1]]
    nhwc = g.home(inp)
    if nhwc:
        perm = [PERM_NHWC_TO_NCHW[p] for p in perm]
    src = g.get(inp, nhwc)
    if perm == list(range(rank)):
        g.put(node, src, NCHW)
        return
    g.add(x.XNNStaticTranspose(rank, perm, src, g.out(node, NCHW)))


def _slice_bounds(node: Node) -> tuple[int, int]:
    """(dim, start) of a slice_copy/select_copy, normalized to the input's shape."""
    in_shape = shape_of(node.args[0])
    dim = node.args[1] % len(in_shape)
    if node.target == aten.select_copy.int:
        start = node.args[2]
    else:
        start = arg(node, 2, "start", 0)
        start = 0 if start is None else start
    if start < 0:
        start += in_shape[dim]
    return dim, min(max(start, 0), in_shape[dim])


def _check_slice(node: Node, ep: ExportedProgram) -> str | None:
    step = arg(node, 4, "step", 1)
    if step != 1:
        return f"step {step} (XNNPACK slices with step 1 only)"
    return dynamic_reason(node.args[0], node)


@rule(aten.slice_copy.Tensor, check=_check_slice)
def _slice(g: Builder, node: Node) -> None:
    inp = node.args[0]
    rank = len(shape_of(inp))
    dim, start = _slice_bounds(node)
    nhwc = rank == 4 and g.home(inp)
    if nhwc:
        dim = _nhwc_dim(dim)
    offsets = [0] * rank
    offsets[dim] = start
    sizes = permuted(shape_of(node), nhwc)
    g.add(x.XNNStaticSlice(rank, offsets, sizes, g.get(inp, nhwc), g.out(node, nhwc)))


@rule(aten.select_copy.int, check=_check_slice)
def _select(g: Builder, node: Node) -> None:
    inp = node.args[0]
    in_shape = shape_of(inp)
    dim, start = _slice_bounds(node)
    offsets = [0] * len(in_shape)
    offsets[dim] = start
    sizes = list(in_shape)
    sizes[dim] = 1
    sliced = g.value(sizes)
    g.add(x.XNNStaticSlice(len(in_shape), offsets, sizes, g.get(inp, NCHW), sliced))
    g.put(node, g.reshape(sliced, node), NCHW)


_CONCAT = {2: x.XNNConcatenate2, 3: x.XNNConcatenate3, 4: x.XNNConcatenate4,
           5: x.XNNConcatenate5}


def _check_cat(node: Node, ep: ExportedProgram) -> str | None:
    tensors = node.args[0]
    if len(tensors) < 2:
        return f"concatenation of {len(tensors)} tensor (XNNPACK needs at least 2)"
    ranks = {len(shape_of(t)) for t in tensors}
    if len(ranks) != 1:
        return f"inputs of different ranks {sorted(ranks)}"
    return None


@rule(aten.cat.default, check=_check_cat)
def _cat(g: Builder, node: Node) -> None:
    tensors = list(node.args[0])
    rank = len(shape_of(node))
    dim = arg(node, 1, "dim", 0) % rank
    nhwc = rank == 4 and any(g.home(t) == NHWC for t in tensors if g.static(t) is None)
    axis = _nhwc_dim(dim) if nhwc else dim
    ids = [g.get(t, nhwc) for t in tensors]
    # XNNPACK concatenates at most 5 tensors: chain (as ExecuTorch's DecomposeConcatenate).
    while len(ids) > 5:
        dims = g.dims(ids[0])
        dims[axis] = sum(g.dims(i)[axis] for i in ids[:5])
        partial = g.value(dims)
        g.add(_concat_node(axis, ids[:5], partial))
        ids = [partial, *ids[5:]]
    g.add(_concat_node(axis, ids, g.out(node, nhwc)))


def _concat_node(axis: int, ids: list[int], out: int) -> Any:
    padded = ids + [x.XNN_INVALID_VALUE_ID] * (5 - len(ids))
    return _CONCAT[len(ids)](axis, padded[0], padded[1], padded[2], padded[3], out,
                             input5_id=padded[4])


def _check_pad(node: Node, ep: ExportedProgram) -> str | None:
    pad = list(node.args[1])
    if any(p < 0 for p in pad):
        return f"negative padding {pad} (cropping) is not supported"
    if len(pad) % 2 or len(pad) // 2 > len(shape_of(node.args[0])):
        return f"padding {pad} does not fit the input's rank"
    return None


@rule(aten.constant_pad_nd.default, check=_check_pad)
def _pad(g: Builder, node: Node) -> None:
    inp = node.args[0]
    rank = len(shape_of(inp))
    pad = list(node.args[1]) + [0] * (2 * rank - len(node.args[1]))
    pre, post = pad[-2::-2], pad[::-2]  # per dimension, first to last
    nhwc = rank == 4 and g.home(inp)
    value = float(arg(node, 2, "value", 0.0))
    g.add(x.XNNStaticConstantPad(permuted(pre, nhwc), permuted(post, nhwc), value,
                                 g.get(inp, nhwc), g.out(node, nhwc)))
