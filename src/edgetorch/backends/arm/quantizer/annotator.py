"""Which inputs and outputs of each node get an observer: ExecuTorch 1.5.1's Arm rules.

- conv/linear: input activation, weight, int32 bias; the output is observed unless a ReLU or
  a ``hardtanh(min=0)`` (ReLU6) follows, which then carries the output observer (fused ranges).
- add/sub/mul/mm/bmm/minimum/maximum: both inputs and the output get their own observers.
- ops that do not change values (view, reshape, permute, pooling, relu, hardtanh, ...) share
  their input's qparams; cat shares the first input's.
``F.relu6`` (``aten.relu6``) is rewritten to ``hardtanh(x, 0, 6)`` before annotation, so it is
quantized exactly like ``nn.ReLU6`` (ExecuTorch leaves it float, splitting the delegate).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationConfig,
    SharedQuantizationSpec,
)

from .quantization_config import bias_qspec

aten = torch.ops.aten
ANNOTATION_KEY = "quantization_annotation"

CONV_OPS = {aten.conv1d.default, aten.conv2d.default, aten.conv2d.padding,
            aten.conv_transpose2d.input, aten.conv3d.default}
FUSABLE_ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.hardtanh.default,
                       aten.hardtanh_.default}
BINARY_OPS = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.mm.default,
              aten.bmm.default, aten.minimum.default, aten.maximum.default}
SHARED_OR_INPUT_ACT = {
    aten.alias.default, aten.clone.default, aten.hardtanh.default, aten.hardtanh_.default,
    aten.relu.default, aten.relu_.default, aten.mean.default, aten.mean.dim,
    aten.permute.default, aten.permute_copy.default, aten.avg_pool2d.default,
    aten.max_pool2d.default, aten.flatten.using_ints, aten.dropout.default,
    aten.adaptive_avg_pool2d.default, aten.alias_copy.default}
SHARED_INPUT = {
    aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
    aten.reshape.default, aten.view.default, aten.view_copy.default, aten._unsafe_view.default,
    aten.select.int, aten.slice.Tensor, aten.transpose.int, aten.t.default,
    aten.contiguous.default, aten.pad.default, aten.clamp.default, aten.flip.default,
    aten.repeat.default, aten.expand.default, aten.neg.default, aten.amax.default,
    aten.amin.default, aten.upsample_nearest2d.vec}
OWN_IO = {aten.sigmoid.default, aten.tanh.default, aten.exp.default, aten.log.default,
          aten.hardswish.default, aten.hardsigmoid.default, aten.gelu.default,
          aten.silu.default, aten.rsqrt.default, aten.reciprocal.default, aten.abs.default,
          aten.leaky_relu.default, aten.sum.dim_IntList}


def is_annotated(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann._annotated


def _output_annotated(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann.output_qspec is not None


def _is_float_tensor(node: object) -> bool:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _min_zero(act: Node) -> bool:
    if act.target in (aten.hardtanh.default, aten.hardtanh_.default):
        return (act.args[1] if len(act.args) > 1 else act.kwargs.get("min_val", -1.0)) == 0
    return True


def _fused_activation(node: Node) -> Node | None:
    users = list(node.users)
    if len(users) == 1 and users[0].target in FUSABLE_ACTIVATIONS and _min_zero(users[0]):
        return users[0]
    return None


def _producer_is_fusing_conv(act: Node) -> bool:
    src = act.args[0]
    return (isinstance(src, Node) and src.target in CONV_OPS | {aten.linear.default}
            and _fused_activation(src) is act)


def _annotate(node: Node, inputs: dict, output) -> None:
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={k: v for k, v in inputs.items() if isinstance(k, Node)},
        output_qspec=output, _annotated=True)


def annotate_node(node: Node, cfg: QuantizationConfig) -> None:  # noqa: C901 - one rule table
    act_in, act_out, weight = cfg.input_activation, cfg.output_activation, cfg.weight
    target = node.target
    if target in CONV_OPS or target == aten.linear.default:
        inputs: dict = {node.args[0]: act_in, node.args[1]: weight}
        if len(node.args) > 2 and isinstance(node.args[2], Node):
            inputs[node.args[2]] = bias_qspec(cfg, node)
        _annotate(node, inputs, None if _fused_activation(node) else act_out)
        for w in node.args[1:3]:
            if isinstance(w, Node) and w.op in ("get_attr", "placeholder"):
                w.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation(_annotated=True))
    elif target in FUSABLE_ACTIVATIONS and _producer_is_fusing_conv(node):
        _annotate(node, {}, act_out)
    elif target in BINARY_OPS:
        a, b = node.args[0], node.args[1]
        if not (_is_float_tensor(a) and _is_float_tensor(b)):
            return  # scalar operands are not quantized here, as in ExecuTorch
        _annotate(node, {a: act_in, b: act_in}, act_out)
    elif target in SHARED_OR_INPUT_ACT:
        src = node.args[0]
        in_spec = SharedQuantizationSpec(src) if _output_annotated(src) else act_in
        _annotate(node, {src: in_spec}, SharedQuantizationSpec((src, node)))
    elif target in (aten.cat.default, aten.concat.default):
        srcs = list(node.args[0])
        shared = SharedQuantizationSpec((srcs[0], node))
        _annotate(node, {s: (act_in if i == 0 else shared) for i, s in enumerate(srcs)}, shared)
    elif target in OWN_IO:
        _annotate(node, {node.args[0]: act_in}, act_out)
    elif target in SHARED_INPUT:
        src = node.args[0]
        _annotate(node, {src: act_in}, SharedQuantizationSpec((src, node)))
    elif target == operator.getitem and _output_annotated(node.args[0]):
        shared = SharedQuantizationSpec(node.args[0])
        _annotate(node, {node.args[0]: shared}, shared)


def annotate_graph(gm: GraphModule, cfg: QuantizationConfig | None,
                   accepts: Callable[[Node], bool]) -> None:
    """Annotate every not-yet-annotated node ``accepts`` lets through, in graph order."""
    if cfg is None:
        return
    for node in gm.graph.nodes:
        if node.op == "call_function" and not is_annotated(node) and accepts(node):
            annotate_node(node, cfg)


def annotate_io(gm: GraphModule, cfg: QuantizationConfig) -> None:
    """``set_io``: observe the model's inputs and outputs with ``cfg``."""
    for node in gm.graph.nodes:
        if is_annotated(node):
            continue
        if node.op == "placeholder" and node.users and _is_float_tensor(node):
            _annotate(node, {}, cfg.output_activation)
        elif node.op == "output":
            parents = [p for p in node.all_input_nodes if _is_float_tensor(p)]
            _annotate(node, {p: cfg.input_activation for p in parents}, None)


def relu6_as_hardtanh(gm: GraphModule) -> None:
    """``aten.relu6(x)`` -> ``aten.hardtanh(x, 0.0, 6.0)``: the same function, and the form
    ``nn.ReLU6`` already exports to, so both quantize (and fuse into the conv) alike."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (aten.relu6.default, aten.relu6_.default):
            node.target = aten.hardtanh.default
            node.args = (node.args[0], 0.0, 6.0)
    gm.recompile()


def adaptive_pool_as_avg_pool(gm: GraphModule) -> None:
    """``adaptive_avg_pool2d(x, 1)`` -> ``avg_pool2d(x, kernel=(H, W), stride=1)``, as
    ExecuTorch's annotation pipeline decomposes it: the float sums then round alike, so the
    observers downstream see the same values and pick the same scales."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target != aten.adaptive_avg_pool2d.default:
            continue
        val = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
        if val is None or val.dim() != 4 or list(node.args[1]) != [1, 1]:
            continue
        h, w = int(val.shape[2]), int(val.shape[3])
        node.target = aten.avg_pool2d.default
        node.args = (node.args[0], [h, w], [1, 1], [0, 0])
    gm.recompile()


def mean_as_sum_mul(gm: GraphModule) -> None:
    """``mean.dim(x, dims, keepdim)`` on a rank-4 ``x`` -> ``sum.dim_IntList(x, dims, True)``
    times a ``[1, 1, 1, 1]`` constant ``1/N`` (then a reshape when ``keepdim`` is False), as
    ExecuTorch's annotation pipeline decomposes it (DecomposeMeanDimPass): the sum, the
    constant and the product each get their own observer, so the qparams match ExecuTorch's.
    Dimensions of size 1 are not reduced (they do not change the mean)."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target != aten.mean.dim:
            continue
        val = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
        out = node.meta.get("val")
        if val is None or out is None or val.dim() != 4:
            continue
        dims = sorted({d % 4 for d in node.args[1]} if node.args[1] else range(4))
        dims = [d for d in dims if int(val.shape[d]) != 1]
        n = 1
        for d in dims:
            n *= int(val.shape[d])
        while hasattr(gm, f"_tensor_constant{count}"):
            count += 1
        name = f"_tensor_constant{count}"
        gm.register_buffer(name, torch.full((1, 1, 1, 1), 1.0 / n, dtype=val.dtype))
        with gm.graph.inserting_before(node):
            x = node.args[0]
            if dims:
                x = gm.graph.call_function(aten.sum.dim_IntList, (x, dims, True))
                x.meta["val"] = val.sum(dims, keepdim=True)
                const = gm.graph.get_attr(name)
                const.meta["val"] = getattr(gm, name)
                x_val = x.meta["val"]
                x = gm.graph.call_function(aten.mul.Tensor, (x, const))
                x.meta["val"] = x_val
            if list(x.meta["val"].shape) != list(out.shape):
                shaped = gm.graph.call_function(aten.reshape.default, (x, list(out.shape)))
                shaped.meta["val"] = out
                x = shaped
        for key in ("nn_module_stack", "stack_trace"):
            for new in (x, *x.all_input_nodes):
                if key in node.meta and new is not node.args[0]:
                    new.meta.setdefault(key, node.meta[key])
        node.replace_all_uses_with(x)
        gm.graph.erase_node(node)
    gm.recompile()


def get_attrs_before_use(gm: GraphModule) -> None:
    """Move each ``get_attr`` right before its first user, in argument order -- the layout
    ExecuTorch's re-traced annotation graph has. convert_pt2e numbers the folded constants
    (``_frozen_paramN``) in graph order, so conv weights and the biases BatchNorm folding
    created interleave (w0, b0, w1, b1, ...) as in ExecuTorch, and the names match."""
    placed: set[Node] = set()
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        for arg in node.all_input_nodes:
            if arg.op == "get_attr" and arg not in placed:
                placed.add(arg)
                node.prepend(arg)
    gm.recompile()


def drop_guard_calls(gm: GraphModule) -> None:
    """Remove ``export(...).module()``'s ``_guards_fn`` call so PT2E works without
    ``check_guards=False`` (ExecuTorch issue #16248)."""
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and str(node.target).startswith("_guards") and not node.users:
            gm.graph.erase_node(node)
    gm.recompile()
