"""Decompositions the Arm quantizer applies before annotating, as ExecuTorch 1.5.1's
``transform_for_annotation`` pipeline does (its ``DecomposeScaledDotProductAttentionPass``,
``DecomposeLayerNormPass``, ``DecomposeVarPass``, ``DecomposeMeanDimPass``,
``ReplaceScalarWithTensorByProfilePass``, ``ScalarsToAttributePass``, ``DecomposeDivPass``,
``DecomposeSoftmaxPass``, ``DecomposeMatmulPass``).

Each composite becomes the primitive operators the TOSA lowering takes, before observers are
inserted, so every intermediate (the softmax's max, exponentials, sum, reciprocal...) gets
its own quantization parameters -- the same ones ExecuTorch computes -- and the whole
composite can run in int8 on the NPU. Nodes are created in ExecuTorch's order (the order
decides the TOSA operator order and names later).

Each decomposition is written as plain tensor code over ``torch.ops.aten`` and traced on the
node's fake values (``make_fx``), then spliced in place of the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch._decomp import get_decompositions
from torch._guards import detect_fake_mode
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx

aten = torch.ops.aten

_META_KEYS = ("nn_module_stack", "stack_trace", "source_fn_stack", "from_node")


def _val(node: object):
    return node.meta.get("val") if isinstance(node, Node) else None


def _splice(gm: GraphModule, node: Node, fn: Callable, inputs: list[Node],
            table: dict | None = None, allow_non_fake: bool | None = None) -> Node:
    """Trace ``fn(*inputs' fake values)`` and put its operators in place of ``node``.
    ``allow_non_fake`` traces in a fake mode of its own, as ExecuTorch's make_fx-based passes
    do (the SDPA and matmul decompositions: the flag changes which view ops appear)."""
    values = [_val(n) for n in inputs]
    if allow_non_fake is None:
        with detect_fake_mode(values):
            sub = make_fx(fn, decomposition_table=table or {}, tracing_mode="real")(*values)
    else:
        sub = make_fx(fn, decomposition_table=table or {}, tracing_mode="fake",
                      _allow_non_fake_inputs=allow_non_fake)(*values)
    env: dict[Node, object] = {}
    feed = iter(inputs)
    result: object = None
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(feed)
        elif n.op == "call_function":
            with gm.graph.inserting_before(node):
                new = gm.graph.node_copy(n, lambda a: env[a])
            new.meta = {"val": n.meta.get("val")}
            for key in _META_KEYS:
                if key in node.meta:
                    new.meta[key] = node.meta[key]
            env[n] = new
        elif n.op == "output":
            result = torch.fx.node.map_arg(n.args[0], lambda a: env[a])
    if isinstance(result, (list, tuple)):
        result = result[0]
    assert isinstance(result, Node), "a decomposition returns one tensor"
    node.replace_all_uses_with(result)
    gm.graph.erase_node(node)
    return result


def _scaled_dot_product_attention(gm: GraphModule, node: Node) -> bool:
    """ExecuTorch's shared DecomposeScaledDotProductAttention: torch's math decomposition
    (via ``_scaled_dot_product_flash_attention_for_cpu``), with a given ``scale`` applied as
    ``sqrt(scale)`` to each of q and k."""
    args = list(node.args[:3])
    optional = [("attn_mask", None), ("dropout_p", 0.0), ("is_causal", False)]
    for i, (name, default) in enumerate(optional, start=3):
        args.append(node.args[i] if len(node.args) > i else node.kwargs.get(name, default))
    scale = node.kwargs.get("scale")
    tensors = [a for a in args if isinstance(a, Node)]

    def sdpa(*ts):
        it = iter(ts)
        real = [next(it) if isinstance(a, Node) else a for a in args]
        return aten.scaled_dot_product_attention.default(*real, scale=scale)

    table = get_decompositions([aten._scaled_dot_product_flash_attention_for_cpu.default])
    first = node.prev
    _splice(gm, node, sdpa, tensors, table, allow_non_fake=True)
    if scale is not None:
        n = first.next
        while n.op == "call_function" and n.target is not None:
            if n.target == aten.mul.Scalar:
                n.args = (n.args[0], math.sqrt(scale), *n.args[2:])
            n = n.next
    return True


def _layer_norm(gm: GraphModule, node: Node) -> bool:
    """(x - mean) * rsqrt(var + eps) * weight + bias, with mean and var over the normalized
    dims, kept (ExecuTorch's DecomposeLayerNormPass; ``var`` and ``mean`` decompose next)."""
    x, normalized_shape = node.args[0], node.args[1]
    weight = node.args[2] if len(node.args) > 2 else node.kwargs.get("weight")
    bias = node.args[3] if len(node.args) > 3 else node.kwargs.get("bias")
    eps = node.args[4] if len(node.args) > 4 else node.kwargs.get("eps", 1e-5)
    shape = list(_val(node).shape)
    rank = len(shape)
    dims = [d % rank for d in range(-1, -len(normalized_shape) - 1, -1)]
    w_shape = [shape[i] if i in dims else 1 for i in range(rank)]
    inputs = [x] + [t for t in (weight, bias) if isinstance(t, Node)]

    def layer_norm(xv, *wb):
        it = iter(wb)
        w = next(it) if isinstance(weight, Node) else None
        b = next(it) if isinstance(bias, Node) else None
        mean = aten.mean.dim(xv, dims, True)
        centered = aten.sub.Tensor(xv, mean)
        var = aten.var.correction(xv, dims, correction=0, keepdim=True)
        y = aten.mul.Tensor(centered, aten.rsqrt.default(aten.add.Tensor(var, eps)))
        if w is not None:
            y = aten.mul.Tensor(y, aten.reshape.default(w, w_shape))
        if b is not None:
            y = aten.add.Tensor(y, aten.reshape.default(b, w_shape))
        return y

    _splice(gm, node, layer_norm, inputs)
    return True


def _var(gm: GraphModule, node: Node) -> bool:
    """mean, x - mean, its square, sum, times ``1 / max(0, N - correction)``."""
    x = node.args[0]
    shape = list(_val(x).shape)
    dims = node.args[1] if len(node.args) > 1 and node.args[1] is not None else list(range(len(shape)))
    if node.target == aten.var.dim:
        correction = int(node.args[2]) if len(node.args) > 2 else 1
        keepdim = node.args[3] if len(node.args) > 3 else False
    else:
        correction = node.kwargs.get("correction", 1)
        keepdim = node.kwargs.get("keepdim", False)
    n = math.prod(shape[d] for d in dims)

    def var(xv):
        mean = aten.mean.dim(xv, dims, True)
        diff = aten.sub.Tensor(xv, mean)
        total = aten.sum.dim_IntList(aten.mul.Tensor(diff, diff), dims, keepdim)
        return aten.mul.Tensor(total, 1 / max(0, n - correction))

    _splice(gm, node, var, [x])
    return True


def _mean(gm: GraphModule, node: Node) -> bool:
    """ExecuTorch's DecomposeMeanDimPass: viewed as rank 4 (leading 1s, or leading dims
    merged), a sum over the reduced dims that are not 1, times ``1/N``, viewed back."""
    x = node.args[0]
    shape = list(_val(x).shape)
    out_shape = list(_val(node).shape)
    dims = node.args[1] if len(node.args) > 1 and node.args[1] is not None else range(len(shape))
    dims = [d % len(shape) for d in dims]
    dims = [d for d in dims if shape[d] != 1]
    new_shape = list(shape)
    while len(new_shape) < 4:
        new_shape.insert(0, 1)
        dims = [d + 1 for d in dims]
    while len(new_shape) > 4:
        first = new_shape.pop(0)
        new_shape[0] *= first
        dims = [d - 1 for d in dims]
    if len(shape) > 4:
        return False  # ExecuTorch re-views to rank 5; not needed by the models here

    def mean(xv):
        y = aten.reshape.default(xv, new_shape) if len(shape) != 4 else xv
        if dims:
            n = math.prod(new_shape[d] for d in dims)
            y = aten.mul.Tensor(aten.sum.dim_IntList(y, dims, True), 1 / n)
        if list(y.shape) != out_shape:
            y = aten.reshape.default(y, out_shape)
        return y

    _splice(gm, node, mean, [x])
    return True


def _div(gm: GraphModule, node: Node) -> bool:
    a, b = node.args[0], node.args[1]
    if not isinstance(b, Node):
        return False
    inputs = [a, b] if isinstance(a, Node) else [b]

    def div(*ts):
        num, den = (ts[0], ts[1]) if isinstance(a, Node) else (a, ts[0])
        return aten.mul.Tensor(num, aten.reciprocal.default(den))

    _splice(gm, node, div, inputs)
    return True


def _softmax(gm: GraphModule, node: Node) -> bool:
    """max, x - max, exp, sum, reciprocal, product (and log for log_softmax)."""
    x, dim = node.args[0], node.args[1]

    def softmax(xv):
        e = aten.exp.default(aten.sub.Tensor(xv, aten.amax.default(xv, [dim], True)))
        y = aten.mul.Tensor(e, aten.reciprocal.default(aten.sum.dim_IntList(e, [dim], True)))
        return aten.log.default(y) if node.target == aten.log_softmax.int else y

    _splice(gm, node, softmax, [x])
    return True


def _matmul(gm: GraphModule, node: Node) -> bool:
    """torch's own decomposition (expand, view, bmm/mm, view), as ExecuTorch's
    DecomposeMatmulPass (matrix-vector products are left alone)."""
    a, b = node.args[0], node.args[1]
    if _val(b).dim() == 1 or _val(a).dim() == 1:
        return False
    table = get_decompositions([aten.matmul.default])
    _splice(gm, node, lambda x, y: aten.matmul.default(x, y), [a, b], table,
            allow_non_fake=False)
    return True


_SCALAR_TO_TENSOR = {aten.add.Scalar: aten.add.Tensor, aten.sub.Scalar: aten.sub.Tensor,
                     aten.mul.Scalar: aten.mul.Tensor, aten.div.Scalar: aten.div.Tensor}


def _scalar_to_full(gm: GraphModule, node: Node) -> bool:
    """``mul.Scalar(x, s)`` -> ``mul.Tensor(x, full((1,), s))`` (ExecuTorch's
    ReplaceScalarWithTensorByProfilePass)."""
    if len(node.args) != 2 or node.kwargs:
        return False
    x, s = node.args
    val = _val(x)
    with gm.graph.inserting_before(node):
        full = gm.graph.call_function(aten.full.default, ((1,), float(s)),
                                      {"dtype": val.dtype, "device": val.device})
    with detect_fake_mode([val]):
        full.meta["val"] = torch.full((1,), float(s), dtype=val.dtype, device=val.device)
    node.target = _SCALAR_TO_TENSOR[node.target]
    node.args = (x, full)
    return True


# (targets, rewrite) in ExecuTorch's order; a rewrite returns False to leave the node.
PIPELINE: list[tuple[set, Callable[[GraphModule, Node], bool]]] = [
    ({aten.scaled_dot_product_attention.default}, _scaled_dot_product_attention),
    ({aten.layer_norm.default}, _layer_norm),
    ({aten.var.correction, aten.var.dim}, _var),
    ({aten.mean.dim, aten.mean.default}, _mean),
    (set(_SCALAR_TO_TENSOR), _scalar_to_full),
    ({aten.div.Tensor, aten.div_.Tensor}, _div),
    ({aten.softmax.int, aten._safe_softmax.default, aten.log_softmax.int}, _softmax),
    ({aten.matmul.default}, _matmul),
]


def decompose_for_annotation(gm: GraphModule, before_scalars: Callable[[GraphModule], None]
                             ) -> None:
    """Run ``PIPELINE`` over ``gm``; ``before_scalars`` (the float-scalar-to-constant rule)
    runs where ExecuTorch runs ScalarsToAttributePass: after the scalar-to-``full``
    replacement, before ``div`` and ``softmax`` decompose."""
    for targets, rewrite in PIPELINE:
        if rewrite is _div:
            before_scalars(gm)
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target in targets:
                rewrite(gm, node)
        gm.graph.eliminate_dead_code()
        gm.recompile()
