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
    aten.max_pool2d.default, aten.flatten.using_ints, aten.dropout.default, aten.dropout_.default,
    aten.adaptive_avg_pool2d.default, aten.alias_copy.default, aten.pixel_shuffle.default,
    aten.pixel_unshuffle.default}
# Operators whose output shares the input's qparams (ExecuTorch's
# ``_one_to_one_shared_input_qspec``): they move or select values without changing them.
SHARED_INPUT = {
    aten.squeeze.default, aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.squeeze_.dim,
    aten.squeeze.dim, aten.squeeze.dims, aten.unbind.int, aten.unsqueeze.default,
    aten.unsqueeze_copy.default, aten.reshape.default, aten.repeat.default,
    aten.repeat_interleave.self_int, aten.expand_copy.default, aten.expand.default,
    aten.view.default, aten.view_as.default, aten.view_copy.default, aten._unsafe_view.default,
    aten.select.int, aten.select_copy.int, aten.slice.Tensor, aten.slice_copy.Tensor,
    aten.split.Tensor, aten.split_with_sizes.default, aten.split_copy.Tensor,
    aten.transpose.int, aten.transpose_copy.int, aten.moveaxis.int, aten.moveaxis.intlist,
    aten.movedim.int, aten.movedim.intlist, aten.t_copy.default, aten.tile.default,
    aten.flip.default, aten.chunk.default, aten.contiguous.default,
    aten.upsample_bilinear2d.vec, aten.upsample_nearest2d.vec, aten.pad.default,
    aten.amax.default, aten.amin.default, aten.clamp.default, aten.clamp.Tensor,
    aten.unflatten.int, aten.gather.default, aten.unfold_copy.default, aten.index_select.default,
    aten.index.Tensor, aten.as_strided_copy.default, aten.neg.default, aten.detach_copy.default,
    aten.t.default}
# Their own input and output qparams (ExecuTorch's ``_one_to_one``).
OWN_IO = {
    aten.abs.default, aten.ceil.default, aten.erf.default, aten.erfinv.default,
    aten.exp.default, aten.expm1.default, aten.elu.default, aten.selu.default, aten.celu.default,
    aten.floor.default, aten.round.default, aten.log.default, aten.reciprocal.default,
    aten.rsqrt.default, aten.sigmoid.default, aten.cos.default, aten.sin.default,
    aten.tanh.default, aten.sum.dim_IntList, aten.sum.default, aten.hardsigmoid.default,
    aten.hardswish.default, aten.hardswish_.default, aten.leaky_relu.default,
    aten.leaky_relu_.default, aten.full_like.default, aten.zeros_like.default,
    aten.pow.Tensor_Scalar, aten.gelu.default, aten.silu.default, aten.silu_.default,
    aten.sinh.default, aten.atan.default, aten.log1p.default, aten.log10.default,
    aten.acosh.default, aten.sign.default, aten.asinh.default, aten.cosh.default,
    aten.cumsum.default, aten.remainder.Scalar, aten.tan.default}
# Constants created in the graph: only their output is observed.
CONSTANT_OPS = {aten.full.default, aten.zeros.default, aten.ones.default,
                aten.scalar_tensor.default}


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
    elif target == aten.where.self:
        # both branches and the result share the true branch's qparams (ExecuTorch's rule),
        # so a ``where(c, y, y * 0.5)`` gate needs no rescaling; the condition is not quantized
        true_node, other = node.args[1], node.args[2]
        if not (_is_float_tensor(true_node) and _is_float_tensor(other)):
            return
        shared = SharedQuantizationSpec((true_node, node))
        in_spec = SharedQuantizationSpec(true_node) if _output_annotated(true_node) else act_in
        _annotate(node, {true_node: in_spec, other: shared}, shared)
    elif target in OWN_IO:
        _annotate(node, {node.args[0]: act_in}, act_out)
    elif target in CONSTANT_OPS:
        _annotate(node, {}, act_out)
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


SCALAR_OPERAND_OPS = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor}


def scalars_to_attributes(gm: GraphModule) -> None:
    """A float scalar operand of add/sub/mul becomes a constant tensor of shape
    ``[1] * rank`` (``_tensor_constant_N``), as ExecuTorch's ScalarsToAttributePass does: the
    constant is then observed and quantized like any operand, so ``x * 0.5`` is an int8 MUL
    the delegate takes rather than a float op left on the CPU."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in SCALAR_OPERAND_OPS:
            continue
        out = node.meta.get("val")
        if not isinstance(out, torch.Tensor) or not out.dtype.is_floating_point:
            continue
        rank = max([1] + [n.meta["val"].dim() for n in node.args
                          if isinstance(n, Node) and isinstance(n.meta.get("val"), torch.Tensor)])
        args = list(node.args)
        for i, arg in enumerate(args[:2]):
            if not isinstance(arg, (int, float)) or isinstance(arg, bool):
                continue
            while hasattr(gm, f"_tensor_constant_{count}"):
                count += 1
            name = f"_tensor_constant_{count}"
            gm.register_buffer(name, torch.tensor(float(arg), dtype=out.dtype).reshape((1,) * rank))
            with gm.graph.inserting_before(node):
                const = gm.graph.get_attr(name)
            const.meta["val"] = getattr(gm, name)
            args[i] = const
        node.args = tuple(args)
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
