"""Which edge operators the TOSA INT profile takes, with the Ethos-U55 restrictions, and why
a node is rejected (the reason goes into the partitioner's "rejected nodes" report).

The accepted set is ExecuTorch 1.5.1's ``TOSA_PRO_INT_SupportList`` restricted to what
edgetorch lowers today (``LOWERABLE``); a node ExecuTorch would take but we cannot lower yet is
rejected with that reason, so the model still runs (on the CPU) rather than failing.
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from .specification import TosaSpecification

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

Q_OPS = {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor}
DQ_OPS = {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor,
          qd.dequantize_per_channel.default}
QDQ_OPS = Q_OPS | DQ_OPS

# ExecuTorch's INT-profile list (edge op names), for the report: "supported by ExecuTorch's
# TOSA INT profile but not lowered by edgetorch yet" vs "not in the TOSA INT profile".
TOSA_PRO_INT_NAMES = frozenset("""
abs acos acosh add alias_copy amax amin any arange argmax asin asinh atan atanh bitwise_and
bitwise_or bitwise_xor bitwise_not bitwise_left_shift __lshift__ bmm cat ceil celu clamp
constant_pad_nd copy cos cosh cumsum detach_copy div elu eq ge gt le lt erf erfinv exp
expand_copy expm1 eye flip floor full full_like gelu hardsigmoid hardswish hardtanh leaky_relu
linear linspace log log10 log1p logical_and logical_or logical_xor logical_not masked_fill
maximum mean minimum mm mul neg pad permute_copy pow reciprocal relu remainder repeat round
rsqrt scalar_tensor select_copy selu sigmoid sign silu sin sinh split_copy
split_with_sizes_copy squeeze_copy sub tan tanh unsqueeze_copy view_copy _adaptive_avg_pool2d clone dropout
getitem quantize_per_tensor dequantize_per_tensor quantize_per_channel dequantize_per_channel
convolution conv_transpose2d avg_pool2d max_pool2d max_pool2d_with_indices sum prod
slice_copy embedding gather index index_select index_put where upsample_nearest2d
upsample_bilinear2d unfold_copy as_strided_copy __rshift__ bitwise_right_shift
_to_dim_order_copy _clone_dim_order
""".split())

# What U55/U65 reject on top (ExecuTorch's EthosU55NotSupported).
U55_REJECTED = frozenset("""
any bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift
__lshift__ __rshift__ logical_and logical_or logical_xor logical_not eq ge gt le lt ne gather
index index_select index_put scatter upsample_bilinear2d where
""".split())

# What edgetorch's TOSA lowering handles (edge targets).
LOWERABLE = {
    aten.add.Tensor, aten.convolution.default, aten.relu.default, aten.hardtanh.default,
    aten.avg_pool2d.default, aten._adaptive_avg_pool2d.default, aten.mean.dim,
    aten.view_copy.default, aten.linear.default, aten.clone.default, aten.alias_copy.default,
    aten.dropout.default, operator.getitem, aten.mul.Tensor, aten.sum.dim_IntList,
} | QDQ_OPS


# Edge copies that keep dtype and layout (dropout in eval mode becomes one).
IDENTITY_NAMES = {"dim_order_ops._clone_dim_order.default", "dim_order_ops._to_dim_order_copy.default"}


def lowerable(node: Node) -> bool:
    return node.target in LOWERABLE or str(node.target) in IDENTITY_NAMES


def op_name(node: Node) -> str:
    """``aten.where.self`` -> ``where``; ``operator.getitem`` -> ``getitem``."""
    target = node.target
    if not hasattr(target, "_schema") and callable(target):
        return getattr(target, "__name__", str(target))
    parts = str(target).split("::")[-1].split(".")
    return parts[1] if len(parts) >= 3 else parts[0]


def _float_inputs_dequantized(node: Node) -> bool:
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype.is_floating_point and arg.target not in DQ_OPS:
            return False
    return True


def _outputs_quantized(node: Node) -> bool:
    return bool(node.users) and all(u.target in Q_OPS for u in node.users)


FUSED_ACTIVATIONS = {aten.relu.default, aten.hardtanh.default}
CONVS = {aten.convolution.default, aten.linear.default}


def _fused_into(node: Node) -> Node | None:
    """The activation a conv/linear's range is folded into (its only user), if any."""
    users = list(node.users)
    if node.target in CONVS and len(users) == 1 and users[0].target in FUSED_ACTIVATIONS:
        return users[0]
    return None


def _is_quantized(node: Node) -> bool:
    """Inputs come from dequantize and outputs go to quantize -- through a fused activation
    for a conv followed by ReLU/ReLU6 (the quantizer observes only the activation's output)."""
    act = _fused_into(node)
    if act is not None:
        return _float_inputs_dequantized(node) and _outputs_quantized(act)
    src = node.args[0] if node.args else None
    if node.target in FUSED_ACTIVATIONS and isinstance(src, Node) and _fused_into(src) is node:
        return _float_inputs_dequantized(src) and _outputs_quantized(node)
    return _float_inputs_dequantized(node) and _outputs_quantized(node)


def why_not(node: Node, ep: ExportedProgram, spec: TosaSpecification) -> str | None:
    """Why the TOSA backend for ``spec`` cannot take ``node`` (None: it can)."""
    name = op_name(node)
    if spec.is_U55_subset and name in U55_REJECTED:
        return f"{name} is not supported on Ethos-U55/U65 (EthosU55NotSupported)"
    if name not in TOSA_PRO_INT_NAMES and not lowerable(node):
        return f"{node.target} is not in the TOSA {spec} operator support list"
    if not lowerable(node):
        return (f"{node.target} is in the TOSA INT profile but edgetorch's TOSA lowering does "
                "not handle it yet; it runs on the CPU")
    if node.target in QDQ_OPS or node.target is operator.getitem:
        return None
    if spec.support_integer() and not spec.support_float():
        if not _is_quantized(node):
            return "Node was not marked as quantized in the Arm backend (quantize the model " \
                   "with TOSAQuantizer/EthosUQuantizer, or use a +FP TOSA spec)"
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and val.dim() > 6:
        return f"output rank {val.dim()} exceeds TOSA's 6"
    return _lowering_limit(node)


def _shape(node: object) -> list[int]:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return [int(d) for d in val.shape] if isinstance(val, torch.Tensor) else []


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _lowering_limit(node: Node) -> str | None:
    """The cases edgetorch's lowering does not cover yet (they stay on the CPU)."""
    t = node.target
    todo = "is not lowered by edgetorch's TOSA backend yet; it runs on the CPU"
    if t in FUSED_ACTIVATIONS:
        src = node.args[0]
        if not (isinstance(src, Node) and _fused_into(src) is node):
            return f"a {op_name(node)} not right after a convolution/linear (CLAMP) {todo}"
        if t == aten.hardtanh.default:
            q = next(iter(node.users))
            if q.target not in Q_OPS:
                return f"a float hardtanh {todo}"
            top = round(float(node.args[2]) / float(q.args[1])) + int(q.args[2])
            if node.args[1] != 0 or top < int(q.args[4]):
                return f"a hardtanh({node.args[1]}, {node.args[2]}) narrower than int8 {todo}"
    elif t in CONVS and _fused_into(node) is not None and _lowering_limit(_fused_into(node)):
        return f"its activation %{_fused_into(node).name} cannot be folded in; it {todo}"
    elif t == aten.convolution.default:
        if node.args[6] or len(node.args[3]) != 2:
            return f"a transposed or non-2D convolution {todo}"
    elif t == aten.view_copy.default:
        src = _shape(node.args[0])
        if not (len(src) == 4 and src[2:] == [1, 1] and _shape(node) == src[:2]):
            return f"a view other than flattening a [N, C, 1, 1] map {todo}"
    elif t == aten.linear.default:
        src = node.args[0]
        while isinstance(src, Node) and (src.target in QDQ_OPS or "clone" in str(src.target)):
            src = src.args[0]
        if not (isinstance(src, Node) and src.target == aten.view_copy.default):
            return f"a linear not fed by a flattened pooled map {todo}"
    elif t == aten.mean.dim:
        if sorted(d % 4 for d in node.args[1]) != [2, 3] or len(_shape(node.args[0])) != 4:
            return f"a mean other than over H and W {todo}"
    elif t in (aten.mul.Tensor, aten.sum.dim_IntList):
        shapes = [_shape(a) for a in node.all_input_nodes]
        if any(len(s) != 4 for s in shapes):
            return f"a {op_name(node)} on tensors other than rank 4 {todo}"
        if t == aten.mul.Tensor and shapes[0] != shapes[1] and 1 not in (
                _numel(shapes[0]), _numel(shapes[1])):
            return f"a broadcasting mul {todo}"
        if t == aten.sum.dim_IntList and not (len(node.args) > 2 and node.args[2]):
            return f"a sum without keepdim {todo}"
    elif t == aten._adaptive_avg_pool2d.default and list(node.args[1]) != [1, 1]:
        return f"adaptive pooling to other than 1x1 {todo}"
    elif t == aten.avg_pool2d.default:
        extra = list(node.args[4:]) + [None] * 3
        if extra[0] or extra[2] is not None:
            return f"avg_pool2d with ceil_mode or divisor_override {todo}"
    return None
