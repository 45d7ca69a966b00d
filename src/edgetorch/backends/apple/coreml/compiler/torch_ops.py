"""Converters coremltools 9.0 lacks for Edge-dialect ops, registered into its PyTorch
frontend (as ExecuTorch 1.5.1 registers them): ``split_copy``, the dim-order copies and
clones (contiguous only: Core ML has one layout), and torchao's ``dequantize_affine`` /
``dequantize_codebook`` as Core ML's constexpr dequantization ops."""

from __future__ import annotations

import numpy as np
import torch
from coremltools import _logger
from coremltools.converters.mil.frontend import _utils
from coremltools.converters.mil.frontend.torch.dim_order_ops import (
    _empty_dim_order,
    _to_dim_order_copy,
)
from coremltools.converters.mil.frontend.torch.ops import (
    NUM_TO_NUMPY_DTYPE,
    NUM_TO_TORCH_DTYPE,
    _get_inputs,
    _get_kwinputs,
    noop,
    split,
)
from coremltools.converters.mil.frontend.torch.torch_op_registry import register_torch_op
from coremltools.converters.mil.mil import types

_IOS18_QUANT_HINT = (
    "edgetorch hint: pass `compile_specs=CoreMLBackend.generate_compile_specs("
    "minimum_deployment_target=ct.target.iOS18)` (or higher) to `CoreMLPartitioner` when "
    "lowering models that use `quantize_(...)`.")


def _with_hint(err: Exception) -> BaseException:
    if "iOS18" in str(err) or "iOS 18" in str(err):
        return ValueError(f"{err}\n{_IOS18_QUANT_HINT}")
    return err


@register_torch_op(override=False)
def split_copy(context, node):
    split(context, node)


# coremltools registers these under "dim_order_ops::..." only.
@register_torch_op(torch_alias=["dim_order_ops._to_dim_order_copy"], override=False)
def _to_dim_order_copy_edge_alias(context, node):
    _to_dim_order_copy(context, node)


@register_torch_op(torch_alias=["dim_order_ops._empty_dim_order"], override=False)
def _empty_dim_order_edge_alias(context, node):
    _empty_dim_order(context, node)


@register_torch_op(torch_alias=["dim_order_ops::_clone_dim_order",
                                "dim_order_ops._clone_dim_order"], override=False)
def _clone_dim_order(context, node):
    dim_order = _get_kwinputs(context, node, "dim_order", default=[None])[0]
    node.kwinputs.pop("dim_order")
    order = [int(d) for d in dim_order.val]
    assert order == list(range(len(order))), \
        "Only contiguous memory format is supported in CoreML"
    noop(context, node)  # Core ML tensors are contiguous: a clone is the value itself


@register_torch_op(torch_alias=["torchao::dequantize_affine", "torchao.dequantize_affine"],
                   override=True)  # coremltools 9.0's converter misses the fix of #2589
def dequantize_affine(context, node):
    inputs = _get_inputs(context, node, expected=[7, 8])
    int_data, block_size, scale = inputs[0].val, inputs[1].val, inputs[2].val
    zero_point = inputs[3].val if inputs[3] is not None and inputs[3].val is not None else None
    assert NUM_TO_TORCH_DTYPE[inputs[4].val] in (torch.int8, torch.int32), \
        "input_dtype should be int8 or int32"
    quant_min, quant_max = inputs[5].val, inputs[6].val
    assert len(int_data.shape) == 2, "dequantize_affine only supports rank 2 inputs"
    assert len(int_data.shape) == len(block_size), \
        "block_size must have the same length as int_data.shape"
    assert block_size[0] == 1, "block_size[0] must be 1"
    k, group = int_data.shape[1], block_size[1]
    assert k % group == 0, "k must be divisible by group_size"
    scale = scale.reshape(-1, k // group)
    if zero_point is not None:
        zero_point = zero_point.reshape(-1, k // group)
    if len(inputs) > 7:
        _logger.warning(f"Core ML ignores output_dtype {NUM_TO_NUMPY_DTYPE[inputs[7].val]} on "
                        "torchao.dequantize_affine and instead uses the native precision.")
    if (quant_min, quant_max) == (-8, 7):
        qdtype = types.nptype_from_builtin(types.string_to_builtin("int4"))
    elif (quant_min, quant_max) == (-128, 127):
        qdtype = types.nptype_from_builtin(types.string_to_builtin("int8"))
    else:
        raise ValueError(f"Unsupported quantization range: {quant_min} to {quant_max}.  CoreML "
                         "only supports 4-bit and 8-bit quantization.")
    try:
        out = _utils._construct_constexpr_dequant_op(int_data.astype(qdtype), zero_point, scale,
                                                     name=node.name)
    except ValueError as e:
        raise _with_hint(e) from e
    context.add(out, node.name)


@register_torch_op(torch_alias=["quant::dequantize_codebook", "quant.dequantize_codebook"],
                   override=False)
def dequantize_codebook(context, node):
    inputs = _get_inputs(context, node, expected=[4, 5])
    codes, codebook, nbits = inputs[0].val, inputs[1].val, inputs[2].val
    assert len(codes.shape) == 2, "Only rank 2 inputs are supported"
    assert len(codebook.shape) == 4, "Only rank 4 inputs are supported for codebook"
    assert codebook.shape[0] == 1 or codebook.shape[1] == 1, \
        "Only grouped_channel granularity is supported"
    if codebook.shape[0] == 1:  # one table per column group
        assert codes.shape[1] % codebook.shape[1] == 0, \
            "codes.shape[1] must be divisible by codebook.shape[1]"
    else:  # one table per row group
        assert codes.shape[0] % codebook.shape[0] == 0, \
            "codes.shape[0] must be divisible by codebook.shape[0]"
    assert codebook.shape[2] == 2**nbits
    assert codebook.shape[3] == 1, "Only scalar look up values are supported"
    if len(inputs) > 4:
        _logger.warning(f"Core ML ignores output_dtype {NUM_TO_NUMPY_DTYPE[inputs[4].val]} on "
                        "torchao.dequantize_affine and instead uses the native precision.")
    try:
        out = _utils._construct_constexpr_lut_op(codes.astype(np.int8), codebook,
                                                 name=node.name)
    except ValueError as e:
        raise _with_hint(e) from e
    context.add(out, node.name)
