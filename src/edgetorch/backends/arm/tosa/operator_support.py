"""Which edge operators the TOSA INT and FP profiles take, with the Ethos-U55 restrictions, and why
a node is rejected (the reason goes into the partitioner's "rejected nodes" report).

The accepted sets are ExecuTorch 1.5.1's ``TOSA_PRO_INT_SupportList`` (quantized nodes) and
``TOSA_PRO_FP_SupportList`` (float nodes, for specs with the FP profile). Whether edgetorch's
lowering can take a node is not decided here but by the lowering itself: the partitioner asks
it (``lowering.has_rule``, then a trial lowering of each proposed partition), so a node the
lowering cannot take stays on the CPU with the lowering's reason.
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

# ExecuTorch's FP-profile list (``TOSA_PRO_FP_SupportList``) and the operators its dedicated
# support checks take in both profiles (convolution, pooling, slice, sum...).
TOSA_PRO_FP_NAMES = frozenset("""
abs acos acosh add addmm alias_copy amax amin any arange argmax asin asinh atan atanh bmm cat
ceil celu clamp constant_pad_nd copy cos cosh cumsum detach_copy div elu eq erf erfinv exp
expand_copy expm1 eye flip floor floor_divide full full_like ge gelu glu gt hardsigmoid
hardswish hardtanh le leaky_relu linear linspace log log1p logical_and logical_not logical_or
logical_xor logit lt masked_fill maximum mean minimum mm mul native_group_norm
native_layer_norm ne neg pad permute_copy pow prod reciprocal relu remainder repeat round rsqrt
scalar_tensor select_copy selu sigmoid sign sin sinh slice_scatter split_copy
split_with_sizes_copy sqrt squeeze_copy sub tan tanh unsqueeze_copy var view_copy
_adaptive_avg_pool2d _log_softmax _native_batch_norm_legit_no_training _softmax getitem
bitwise_left_shift __lshift__ convolution conv_transpose2d avg_pool2d max_pool2d
max_pool2d_with_indices slice_copy sum upsample_nearest2d upsample_bilinear2d where embedding
gather index index_select index_put clone dropout _to_dim_order_copy _clone_dim_order
""".split())

# What U55/U65 reject on top (ExecuTorch's EthosU55NotSupported).
U55_REJECTED = frozenset("""
any bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift
__lshift__ __rshift__ logical_and logical_or logical_xor logical_not eq ge gt le lt ne gather
index index_select index_put scatter upsample_bilinear2d where
""".split())

# Edge copies that keep dtype and layout (dropout in eval mode becomes one).
IDENTITY_NAMES = {"dim_order_ops._clone_dim_order.default", "dim_order_ops._to_dim_order_copy.default"}
# Operators outside the profile list that are no-ops on int8 values.
PASS_THROUGH_NAMES = frozenset({"clone", "dropout", "alias_copy"}) | IDENTITY_NAMES


def op_name(node: Node) -> str:
    """``aten.where.self`` -> ``where``; ``operator.getitem`` -> ``getitem``."""
    target = node.target
    if not hasattr(target, "_schema") and callable(target):
        return getattr(target, "__name__", str(target))
    parts = str(target).split("::")[-1].split(".")
    return parts[1] if len(parts) >= 3 else parts[0]


# Operators that only move int8 values (a decomposed ``unbind`` is a slice then a squeeze
# with no quantize between them): a chain of them between a dequantize and a quantize is
# quantized as a whole, as ExecuTorch's annotation meta marks every node of it.
DATA_MOVEMENT = {aten.slice_copy.Tensor, aten.squeeze_copy.dims, aten.squeeze_copy.dim,
                 aten.unsqueeze_copy.default, aten.view_copy.default, aten.select_copy.int,
                 aten.permute_copy.default, aten.expand_copy.default, aten.clone.default,
                 aten.alias_copy.default}


def _moves_only(node: Node) -> bool:
    return node.target in DATA_MOVEMENT or str(node.target) in IDENTITY_NAMES


def _float_inputs_dequantized(node: Node) -> bool:
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype.is_floating_point and \
                arg.target not in DQ_OPS and not (_moves_only(arg) and _float_inputs_dequantized(arg)):
            return False
    return True


def _outputs_quantized(node: Node) -> bool:
    """Every user is a quantize (through the getitem of a multi-output op such as
    max_pool2d_with_indices, or data movement that ends in quantizes)."""
    users = [v for u in node.users
             for v in (u.users if u.target is operator.getitem else [u])]
    return bool(users) and all(u.target in Q_OPS or (_moves_only(u) and _outputs_quantized(u))
                               for u in users)


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
    """Why the TOSA profile ``spec`` (and, for ``+u55`` specs, Ethos-U55/U65) does not take
    ``node``; None when it does. A quantized node (dequantized inputs, quantized outputs)
    needs the INT profile, a float one the FP profile with float32 tensors. Whether
    edgetorch's lowering handles the node is the lowering's to say (``lowering.has_rule``
    and the partitioner's trial lowering)."""
    name = op_name(node)
    if spec.is_U55_subset and name in U55_REJECTED:
        return f"{name} is not supported on Ethos-U55/U65 (EthosU55NotSupported)"
    if node.target in QDQ_OPS:
        return None if spec.support_integer() else \
            f"{name} needs the TOSA INT profile, which {spec} lacks"
    as_float = spec.support_float() and not _is_quantized(node)
    names = TOSA_PRO_FP_NAMES if as_float else TOSA_PRO_INT_NAMES
    if name not in names and name not in PASS_THROUGH_NAMES \
            and str(node.target) not in IDENTITY_NAMES:
        return f"{node.target} is not in the TOSA {spec} operator support list"
    if node.target is operator.getitem:
        return None
    if as_float:
        for arg in node.all_input_nodes:
            val = arg.meta.get("val")
            if isinstance(val, torch.Tensor) and val.dtype != torch.float32:
                return (f"input %{arg.name} is {val.dtype}; edgetorch's FP profile lowering "
                        "takes float32 tensors")
    elif not spec.support_integer():
        return f"a quantized node needs the TOSA INT profile, which {spec} lacks"
    elif not _is_quantized(node):
        return "Node was not marked as quantized in the Arm backend (quantize the model " \
               "with TOSAQuantizer/EthosUQuantizer, or use a +FP TOSA spec)"
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and val.dim() > 6:
        return f"output rank {val.dim()} exceeds TOSA's 6"
    return None
