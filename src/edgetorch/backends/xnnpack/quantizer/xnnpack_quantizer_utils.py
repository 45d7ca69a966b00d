"""The annotators of ``XNNPACKQuantizer``: one per operator pattern XNNPACK runs quantized.

An annotator walks a pre-autograd ATen graph (``torch.export.export(m, x).module()``) and
writes a torchao ``QuantizationAnnotation`` on each match: which inputs get an observer (and
with which spec), and which node's output does. torchao's ``prepare_pt2e`` then inserts the
observers and ``convert_pt2e`` the quantize/dequantize pairs. The patterns, their order of
preference and the specs are those of ExecuTorch 1.5.1's XNNPACK quantizer, so the converted
graphs are the same; what each pattern needs is said next to it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch._subclasses import FakeTensor
from torch.fx import Node
from torch.fx.passes.utils.matcher_with_name_node_map_utils import (
    SubgraphMatcherWithNameNodeMap,
)
from torchao.quantization.pt2e import WrapperModule
from torchao.quantization.pt2e.graph_utils import get_source_partitions
from torchao.quantization.pt2e.quantizer import (
    OperatorConfig,
    OperatorPatternType,
    QuantizationAnnotation,
    QuantizationConfig,
    QuantizationSpec,
    SharedQuantizationSpec,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY
from torchao.quantization.pt2e.utils import (
    _get_aten_graph_module_for_pattern,
    get_new_attr_name_with_prefix,
)

from ....errors import ExportError

__all__ = [
    "OP_TO_ANNOTATOR",
    "OperatorConfig",
    "OperatorPatternType",
    "QuantizationConfig",
    "QuantizationSpec",
    "get_bias_qspec",
    "get_input_act_qspec",
    "get_output_act_qspec",
    "get_weight_qspec",
    "propagate_annotation",
]

aten = torch.ops.aten
Filter = Callable[[Node], bool] | None
Annotator = Callable[[torch.fx.GraphModule, QuantizationConfig | None, Filter],
                     list[list[Node]]]
OP_TO_ANNOTATOR: dict[str, Annotator] = {}

CONV_OPS = {aten.conv1d.default, aten.conv1d.padding, aten.conv2d.default,
            aten.conv2d.padding, aten.conv3d.default, aten.conv3d.padding}
CONV_TRANSPOSE_OPS = {aten.conv_transpose1d, aten.conv_transpose1d.default,
                      aten.conv_transpose2d, aten.conv_transpose2d.input,
                      aten.conv_transpose3d, aten.conv_transpose3d.input}
RELU_OPS = {aten.relu.default, aten.relu_.default}
ADD_OPS = {aten.add.Tensor, aten.add_.Tensor}
MUL_OPS = {aten.mul.Tensor, aten.mul_.Tensor}
HISTC_UPPER_BOUND = 3.4028235e15  # HistogramObserver's histc works up to this magnitude

# Operators whose output keeps its input's quantization parameters (they move or pick values).
SHARE_QPARAMS_OPS = {
    aten.relu.default, aten.hardtanh.default, aten.hardtanh_.default, aten.max_pool2d.default,
    aten.mean.default, aten.mean.dim, aten.permute.default, aten.permute_copy.default,
    aten.transpose.int, aten.squeeze.dim, aten.squeeze_copy.dim,
    aten.adaptive_avg_pool2d.default, aten.view_copy.default, aten.view.default,
    aten.reshape.default, aten.slice.Tensor, aten.slice_copy.Tensor, aten.flatten.using_ints,
    aten.dropout.default, aten.dropout_.default,  # identities in eval, how models deploy
}


def annotator(name: str) -> Callable[[Annotator], Annotator]:
    def deco(fn: Annotator) -> Annotator:
        OP_TO_ANNOTATOR[name] = fn
        return fn
    return deco


# ---- small facts about nodes ---------------------------------------------------------------


def _call(node: object, targets: set) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def is_relu_node(node: Node) -> bool:
    return _call(node, RELU_OPS)


def _is_annotated(nodes: list[Node]) -> bool:
    return any(Q_ANNOTATION_KEY in n.meta and n.meta[Q_ANNOTATION_KEY]._annotated
               for n in nodes)


def _mark_annotated(nodes: list[Node]) -> None:
    for n in nodes:
        if n is not None:
            n.meta.setdefault(Q_ANNOTATION_KEY, QuantizationAnnotation())._annotated = True


def _filtered_out(filter_fn: Filter, nodes: list[Node]) -> bool:
    return filter_fn is not None and any(not filter_fn(n) for n in nodes)


def _optional_arg(node: Node, index: int) -> Node | None:
    a = node.args[index] if len(node.args) > index else None
    return a if isinstance(a, Node) else None


def _conv_groups(conv: Node, transposed: bool) -> int:
    """Groups are not an argument of the training graph's conv: deduce them from shapes."""
    w = conv.args[1].meta["val"].shape
    if transposed:  # weight [C_in, C_out / groups, ...]
        return conv.meta["val"].shape[1] // w[1]
    return conv.args[0].meta["val"].shape[1] // w[1]  # weight [C_out, C_in / groups, ...]


def _transpose_weight_qspec(qspec: QuantizationSpec | None) -> QuantizationSpec | None:
    """A transposed convolution's output channels are its weight's dim 1."""
    return None if qspec is None else dataclasses.replace(qspec, ch_axis=1)


def _is_dynamic(cfg: QuantizationConfig | None) -> bool:
    return bool(cfg and cfg.input_activation and cfg.input_activation.is_dynamic)


# ---- linear ----------------------------------------------------------------------------------


@annotator("linear")
def _annotate_linear(gm, cfg, filter_fn=None):
    partitions = []
    for node in gm.graph.nodes:
        if not _call(node, {aten.linear.default}) or _filtered_out(filter_fn, [node]):
            continue
        if _is_annotated([node]):
            continue
        act, weight, bias = node.args[0], node.args[1], _optional_arg(node, 2)
        qmap = {act: get_input_act_qspec(cfg), weight: get_weight_qspec(cfg)}
        partition = [node, weight]
        if bias is not None:
            qmap[bias] = get_bias_qspec(cfg)
            partition.append(bias)
        node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map=qmap, output_qspec=get_output_act_qspec(cfg))
        _mark_annotated(partition)
        partitions.append(partition)
    return partitions


@annotator("linear_relu")
def _annotate_linear_relu(gm, cfg, filter_fn=None):
    partitions = []
    for relu in gm.graph.nodes:
        if not is_relu_node(relu):
            continue
        linear = relu.args[0]
        if not _call(linear, {aten.linear.default}) or len(linear.users) > 1:
            continue  # a linear used elsewhere cannot take the relu
        weight, bias = linear.args[1], _optional_arg(linear, 2)
        qmap = {linear.args[0]: get_input_act_qspec(cfg), weight: get_weight_qspec(cfg)}
        partition = [relu, linear, weight]
        if bias is not None:
            qmap[bias] = get_bias_qspec(cfg)
            partition.append(bias)
        if _is_annotated(partition) or _filtered_out(filter_fn, partition):
            continue
        _annotate_with_relu(linear, relu, qmap, cfg)
        _mark_annotated(partition)
        partitions.append(partition)
    return partitions



def _annotate_with_relu(op: Node, relu: Node, qmap: dict, cfg) -> None:
    """``op`` quantizes its inputs; the relu after it quantizes the fused output."""
    op.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=qmap, _annotated=True)
    relu.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
        output_qspec=get_output_act_qspec(cfg), _annotated=True)

# ---- convolutions --------------------------------------------------------------------------


def _conv_input_map(conv: Node, cfg, transposed: bool) -> tuple[dict, list[Node]]:
    weight, bias = conv.args[1], _optional_arg(conv, 2)
    w_spec = get_weight_qspec(cfg)
    qmap = {conv.args[0]: get_input_act_qspec(cfg),
            weight: _transpose_weight_qspec(w_spec) if transposed else w_spec}
    partition = [conv, weight]
    if bias is not None:
        qmap[bias] = get_bias_qspec(cfg)
        partition.append(bias)
    return qmap, partition


def _do_annotate_conv(gm, cfg, filter_fn, transposed: bool):
    partitions = []
    targets = CONV_TRANSPOSE_OPS if transposed else CONV_OPS
    for conv in gm.graph.nodes:
        if not _call(conv, targets):
            continue
        if len(conv.users) == 1 and is_relu_node(next(iter(conv.users))):
            continue  # conv_relu takes it
        skip = transposed and _conv_groups(conv, True) != 1  # XNNPACK: one group only
        if _is_dynamic(cfg):  # dynamic quantization: 2-D, non-depthwise convolutions only
            shape = getattr(conv.args[1].meta.get("val"), "shape", None)
            skip = skip or (shape is not None and len(shape) != 4)
            skip = skip or (not transposed and shape is not None and shape[1] == 1)
        qmap, partition = _conv_input_map(conv, cfg, transposed)
        if _is_annotated(partition) or skip or _filtered_out(filter_fn, partition):
            continue
        conv.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map=qmap, output_qspec=get_output_act_qspec(cfg), _annotated=True)
        _mark_annotated(partition)
        partitions.append(partition)
    return partitions


def _do_annotate_conv_relu(gm, cfg, filter_fn, transposed: bool):
    partitions = []
    targets = CONV_TRANSPOSE_OPS if transposed else CONV_OPS
    for relu in gm.graph.nodes:
        if not is_relu_node(relu):
            continue
        conv = relu.args[0]
        if not _call(conv, targets) or len(conv.users) > 1:
            continue
        qmap, partition = _conv_input_map(conv, cfg, transposed)
        partition.insert(0, relu)
        if _is_annotated(partition) or (transposed and _conv_groups(conv, True) != 1):
            continue
        if _filtered_out(filter_fn, partition):
            continue
        _annotate_with_relu(conv, relu, qmap, cfg)
        _mark_annotated(partition)
        partitions.append(partition)
    return partitions


OP_TO_ANNOTATOR["conv"] = lambda gm, cfg, f=None: _do_annotate_conv(gm, cfg, f, False)
OP_TO_ANNOTATOR["conv_transpose"] = lambda gm, cfg, f=None: _do_annotate_conv(gm, cfg, f, True)
OP_TO_ANNOTATOR["conv_relu"] = lambda gm, cfg, f=None: _do_annotate_conv_relu(gm, cfg, f, False)
OP_TO_ANNOTATOR["conv_transpose_relu"] = (
    lambda gm, cfg, f=None: _do_annotate_conv_relu(gm, cfg, f, True))


# ---- conv + batch norm (QAT: in PTQ, prepare_pt2e folds the batch norm first) ---------------

_BN_EXAMPLES = {  # x, conv weight, conv bias, bn weight, bn bias, running mean, running var
    1: ((1, 1, 3), (1, 1, 1)),
    2: ((1, 1, 3, 3), (1, 1, 1, 1)),
}


def _conv_bn_pattern(conv_fn: Callable, has_relu: bool, inplace: bool) -> WrapperModule:
    def pattern(x, w, b, bn_w, bn_b, bn_rm, bn_rv):
        conv = conv_fn(x, w, b)
        out = F.batch_norm(conv, bn_rm, bn_rv, bn_w, bn_b, training=True)
        if has_relu:
            out = F.relu_(out) if inplace else F.relu(out)
        return out, {"input": x, "conv": conv, "weight": w, "bias": b, "output": out}
    return WrapperModule(pattern)


@functools.cache
def _conv_bn_pattern_graph(conv_fn, rank: int, has_relu: bool, inplace: bool):
    """The exported conv-bn(-relu) pattern: the same every time, and each export costs about
    a second, twelve per prepare_pt2e (read only by the matcher, so built once per process)."""
    x_shape, w_shape = _BN_EXAMPLES[rank]
    example = (torch.randn(x_shape), torch.randn(w_shape), *(torch.randn(1) for _ in range(5)))
    pattern = _get_aten_graph_module_for_pattern(
        _conv_bn_pattern(conv_fn, has_relu, inplace), example)
    pattern.graph.eliminate_dead_code()
    pattern.recompile()
    return pattern


def _do_annotate_conv_bn(gm, cfg, filter_fn, has_relu: bool, transposed: bool = False):
    if not any("batch_norm" in str(n.target) for n in gm.graph.nodes):
        return []  # nothing to match: skip building the patterns
    gm.graph.eliminate_dead_code()  # unused batch-norm outputs would defeat the matcher
    gm.recompile()
    fns = ((F.conv_transpose1d, 1), (F.conv_transpose2d, 2)) if transposed else \
        ((F.conv1d, 1), (F.conv2d, 2))
    matches = []
    for (conv_fn, rank), inplace in itertools.product(fns, (True, False) if has_relu else (False,)):
        pattern = _conv_bn_pattern_graph(conv_fn, rank, has_relu, inplace)
        matches.extend(SubgraphMatcherWithNameNodeMap(pattern, ignore_literals=True)
                       .match(gm.graph))
    partitions = []
    for match in matches:
        names = match.name_node_map
        conv, weight, bias = names["conv"], names["weight"], names["bias"]
        partition = [conv, weight] + ([bias] if bias is not None else [])
        if _is_annotated(partition) or _filtered_out(filter_fn, partition):
            continue
        qmap = {names["input"]: get_input_act_qspec(cfg), weight: get_weight_qspec(cfg)}
        if bias is not None:
            qmap[bias] = get_bias_qspec(cfg)
        conv.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=qmap,
                                                             _annotated=True)
        names["output"].meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            output_qspec=get_output_act_qspec(cfg), _annotated=True)
        _mark_annotated(partition)
        partitions.append(partition)
    return partitions


OP_TO_ANNOTATOR["conv_bn"] = lambda gm, cfg, f=None: _do_annotate_conv_bn(gm, cfg, f, False)
OP_TO_ANNOTATOR["conv_bn_relu"] = lambda gm, cfg, f=None: _do_annotate_conv_bn(gm, cfg, f, True)
OP_TO_ANNOTATOR["conv_transpose_bn"] = (
    lambda gm, cfg, f=None: _do_annotate_conv_bn(gm, cfg, f, False, True))
OP_TO_ANNOTATOR["conv_transpose_bn_relu"] = (
    lambda gm, cfg, f=None: _do_annotate_conv_bn(gm, cfg, f, True, True))


# ---- pooling, add, mul, cat ------------------------------------------------------------------


@annotator("adaptive_avg_pool2d")
def _annotate_adaptive_avg_pool2d(gm, cfg, filter_fn=None):
    found = get_source_partitions(gm.graph, [torch.nn.AdaptiveAvgPool2d, F.adaptive_avg_pool2d],
                                  filter_fn)
    partitions = []
    for partition in itertools.chain.from_iterable(found.values()):
        pool = partition.output_nodes[0]
        if not _call(pool, {aten.adaptive_avg_pool2d.default}):
            raise ExportError(f"XNNPACKQuantizer: %{pool.name} ({pool.target}) comes from an "
                              "AdaptiveAvgPool2d but is not aten.adaptive_avg_pool2d; export "
                              "the model with torch.export.export(...).module()")
        if _is_annotated([pool]):
            continue
        partitions.append(partition.nodes)
        act = pool.args[0]
        ann = act.meta.get(Q_ANNOTATION_KEY)
        # The input shares its producer's parameters when that output is quantized already.
        in_spec = (SharedQuantizationSpec(act) if ann is not None and ann._annotated
                   and ann.output_qspec is not None else get_input_act_qspec(cfg))
        pool.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={act: in_spec}, output_qspec=SharedQuantizationSpec((act, pool)),
            _annotated=True)
    return partitions


def _is_input_large_scalar(node: Node, gm: torch.fx.GraphModule) -> bool:
    if node.op != "get_attr":
        return False
    module_path, _, name = str(node.target).rpartition(".")
    tensor = getattr(gm.get_submodule(module_path), name)
    return tensor.numel() == 1 and abs(tensor.item()) > HISTC_UPPER_BOUND


def _is_input_non_float_tensor(node: Node) -> bool:
    val = node.meta.get("val")
    return not isinstance(val, FakeTensor) or val.dtype != torch.float32


def _binary_input_map(gm, node: Node, cfg) -> dict | None:
    """The operands' specs, or None when an operand cannot be observed (not float32, or a
    scalar too large for the histogram observer)."""
    qmap = {}
    for operand in node.args[:2]:
        if isinstance(operand, Node):
            if _is_input_large_scalar(operand, gm) or _is_input_non_float_tensor(operand):
                return None
            qmap[operand] = get_input_act_qspec(cfg)
    return qmap


def _do_annotate_binary_relu(gm, cfg, filter_fn, ops: set):
    partitions = []
    for relu in gm.graph.nodes:
        if not is_relu_node(relu):
            continue
        op = relu.args[0]
        if not _call(op, ops) or len(op.users) > 1:
            continue
        partition = [relu, op]
        if _is_annotated(partition) or _filtered_out(filter_fn, partition):
            continue
        qmap = _binary_input_map(gm, op, cfg)
        if qmap is None:
            continue
        _annotate_with_relu(op, relu, qmap, cfg)
        partitions.append(partition + list(qmap))
    return partitions


def _do_annotate_binary(gm, cfg, filter_fn, ops: set):
    partitions = []
    for op in gm.graph.nodes:
        if not _call(op, ops) or _is_annotated([op]) or _filtered_out(filter_fn, [op]):
            continue
        qmap = _binary_input_map(gm, op, cfg)
        if qmap is None:
            continue
        op.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map=qmap, output_qspec=get_output_act_qspec(cfg), _annotated=True)
        partitions.append([op, *qmap])
    return partitions


OP_TO_ANNOTATOR["add_relu"] = lambda gm, cfg, f=None: _do_annotate_binary_relu(gm, cfg, f, ADD_OPS)
OP_TO_ANNOTATOR["add"] = lambda gm, cfg, f=None: _do_annotate_binary(gm, cfg, f, ADD_OPS)
OP_TO_ANNOTATOR["mul_relu"] = lambda gm, cfg, f=None: _do_annotate_binary_relu(gm, cfg, f, MUL_OPS)
OP_TO_ANNOTATOR["mul"] = lambda gm, cfg, f=None: _do_annotate_binary(gm, cfg, f, MUL_OPS)


def _has_annotated_qparam_source(node: Node) -> bool:
    """Does ``node`` trace back, through parameter-sharing ops, to a quantized output?"""
    seen: set[Node] = set()
    while node not in seen:
        seen.add(node)
        ann = node.meta.get(Q_ANNOTATION_KEY)
        if ann is not None and ann._annotated and ann.output_qspec is not None:
            return True
        if not _call(node, SHARE_QPARAMS_OPS) or not isinstance(node.args[0], Node):
            return False
        node = node.args[0]
    return False


@annotator("cat")
def _annotate_cat(gm, cfg, filter_fn=None):
    """All inputs and the output share one input's parameters: the first input already
    quantized upstream, else the first input. Cat ignores filters, as in ExecuTorch."""
    partitions = []
    for cat in gm.graph.nodes:
        if cat.target != aten.cat.default or _is_annotated([cat]):
            continue
        partitions.append(cat.all_input_nodes)
        inputs = cat.args[0]
        source = next((a for a in inputs if isinstance(a, Node)
                       and _has_annotated_qparam_source(a)), inputs[0])
        qmap = {source: get_input_act_qspec(cfg)} if isinstance(source, Node) else {}
        shared = SharedQuantizationSpec((source, cat))
        for a in inputs:
            qmap.setdefault(a, shared)
        cat.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map=qmap, output_qspec=shared, _annotated=True)
    return partitions


# ---- after annotation ------------------------------------------------------------------------


def propagate_annotation(model: torch.fx.GraphModule) -> None:
    """A parameter-sharing op after a quantized output shares that output's parameters."""
    for n in model.graph.nodes:
        if not _call(n, SHARE_QPARAMS_OPS) or not isinstance(n.args[0], Node):
            continue
        prev = n.args[0]
        ann = prev.meta.get(Q_ANNOTATION_KEY)
        if not ann or not ann.output_qspec or _is_annotated([n]):
            continue
        shared = SharedQuantizationSpec(prev)
        n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={prev: shared}, output_qspec=shared, _annotated=True)


def convert_scalars_to_attrs(model: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Scalar operands of add/mul become float32 buffers, so observers can watch them."""
    for n in model.graph.nodes:
        if not _call(n, {aten.add.Tensor, aten.mul.Tensor}):
            continue
        args = []
        for a in n.args:
            if isinstance(a, Node):
                args.append(a)
                continue
            name = get_new_attr_name_with_prefix("_tensor_constant_")(model)
            value = torch.tensor(float(a))
            model.register_buffer(name, value)
            with model.graph.inserting_before(n):
                attr = model.graph.create_node("get_attr", name, (), {})
            attr.meta["val"] = n.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
            args.append(attr)
        n.args = tuple(args)
    model.recompile()
    return model
