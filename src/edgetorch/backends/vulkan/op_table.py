"""The Vulkan delegate's operators, one ``register`` per family of its C++ implementation
files (ExecuTorch 1.5.1's ``op_registry.py``): dtypes, storage, resize/high-dim/prepack
support, and the per-node checks and storage choices of reductions, convolutions, copies,
indexing, embeddings and grid sampling."""

from __future__ import annotations

import operator

import torch

from ...exir.dialects._ops import ops as exir_ops
from . import utils as u
from .op_registry import register

E = exir_ops.edge
A = E.aten
VK = E.et_vk

# Symbolic and assertion ops: no shader, handled when the graph is built.
register([operator.getitem, torch.ops.aten.sym_size.int, operator.add, operator.sub,
          operator.floordiv, operator.mul, operator.lt, operator.gt, operator.ge, operator.le,
          operator.eq, torch.ops.aten._assert_scalar.default,
          torch.ops.aten.sym_constrain_range_for_size.default],
         inputs_storage=u.ANY_STORAGE, supports_resize=True)


def _copy_is_noop(node: torch.fx.Node) -> bool:
    """``copy(self, src)`` only when it changes neither dtype nor shape."""
    src = node.args[1]
    if not isinstance(src, torch.fx.Node):
        return False
    a, b = src.meta.get("val"), node.meta.get("val")
    return a is not None and b is not None and a.dtype == b.dtype and a.shape == b.shape


register([A.copy.default], inputs_storage=u.ANY_STORAGE, supports_resize=True,
         are_node_inputs_supported_fn=_copy_is_noop)

# UnaryOp.cpp
register([A.abs.default, A.cos.default, A.exp.default, A.gelu.default, A.hardshrink.default,
          A.hardswish.default, A.hardtanh.default, A.neg.default, A.relu.default,
          A.sigmoid.default, A.sin.default, A.sqrt.default, A.rsqrt.default, A.tanh.default,
          A.round.default, A.leaky_relu.default, A.log10.default],
         inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_T, supports_resize=True)
register([A.clamp.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T,
         supports_resize=True)

# BinaryOp.cpp
register([A.add.Tensor, A.sub.Tensor, A.minimum.default, A.mul.Tensor, A.div.Tensor,
          A.div.Tensor_mode, A.pow.Tensor_Tensor],
         inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T, supports_resize=True,
         supports_highdim=True)
register([A.eq.Tensor, A.lt.Tensor, A.le.Tensor, A.gt.Tensor, A.ge.Tensor],
         inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T, outputs_dtypes=u.BOOL_T,
         supports_resize=True, supports_highdim=True)
register([A.bitwise_and.Tensor, A.bitwise_or.Tensor, A.bitwise_not.default,
          A.logical_and.default, A.logical_or.default],
         inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.BOOL_T, supports_resize=True,
         supports_highdim=True)

# BinaryScalarOp.cpp
register([A.pow.Tensor_Scalar], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_T,
         supports_resize=True, supports_highdim=True)
register([A.eq.Scalar], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T,
         outputs_dtypes=u.BOOL_T, supports_resize=True, supports_highdim=True)


def _pick_to_copy_storage(node: torch.fx.Node):
    """Float to float converts in any layout; other conversions run on contiguous buffers."""
    fp = {torch.float16, torch.float32}
    if node.args[0].meta["val"].dtype in fp and node.meta["val"].dtype in fp:
        return u.ANY_STORAGE, u.ANY_STORAGE
    return u.CONTIGUOUS_BUFFER, u.CONTIGUOUS_BUFFER


register([A._to_copy.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_BOOL_T,
         outputs_dtypes=u.FP_INT_BOOL_T, supports_resize=True,
         pick_io_storage_fn=_pick_to_copy_storage)

register([A._log_softmax.default, A._softmax.default], inputs_storage=u.ANY_STORAGE,
         inputs_dtypes=u.FP_T, supports_resize=True)

# MatMul.cpp, Linear.cpp, QuantizedLinearQCSNW.cpp
register([A.bmm.default, A.mm.default], inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T,
         supports_resize=True, supports_prepacking=True)
register([A.addmm.default, A.linear.default], inputs_storage=u.CONTIGUOUS_ANY,
         inputs_dtypes=u.FP_T, supports_resize=True, supports_prepacking=True)
register([A._weight_int8pack_mm.default, VK.linear_qcs4w.default],
         inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T, supports_resize=True,
         supports_prepacking=True)

# QuantizedLinear.cpp
register(["et_vk::linear_q8ta_q8csw", "et_vk::linear_q4gsw"],
         inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T, supports_prepacking=True)
register(["et_vk::linear_q4gsw_backward"], inputs_storage=u.CONTIGUOUS_ANY,
         inputs_dtypes=u.FP_T, supports_prepacking=True)
register(["et_vk::linear_dq8ca_q4gsw"],
         inputs_storage=[u.CONTIGUOUS_ANY, u.WIDTH_PACKED_TEXTURE, u.WIDTH_PACKED_TEXTURE,
                         u.NO_STORAGE, u.NO_STORAGE, u.NO_STORAGE, u.NO_STORAGE, u.NO_STORAGE],
         inputs_dtypes=u.FP_T, supports_prepacking=True)

# QuantizeDequantize.cpp, Q8taQuantizeDequantize.cpp, ChooseQParams.cpp
register(["quantized_decomposed::quantize_per_channel", "quantized_decomposed::quantize_per_token",
          "quantized_decomposed::dequantize_per_channel", "quantized_decomposed::dequantize_per_token"],
         inputs_storage=u.CONTIGUOUS_BUFFER, supports_resize=True)
register(["torchao::quantize_affine", "torchao::dequantize_affine"],
         inputs_storage=u.CONTIGUOUS_BUFFER, supports_resize=True)
register(["quantized_decomposed::quantize_per_tensor", "quantized_decomposed::quantize_per_tensor.tensor"],
         inputs_storage=[u.CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER],
         outputs_storage=[u.PACKED_INT8_BUFFER], supports_highdim=True)
register(["quantized_decomposed::dequantize_per_tensor", "quantized_decomposed::dequantize_per_tensor.tensor"],
         inputs_storage=[u.PACKED_INT8_BUFFER],
         outputs_storage=[u.CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER], supports_highdim=True)
register(["quantized_decomposed::choose_qparams.tensor", "quantized_decomposed::choose_qparams_per_token_asymmetric"],
         inputs_storage=u.CONTIGUOUS_BUFFER, supports_resize=True)
register(["torchao::choose_qparams_affine"], inputs_storage=u.CONTIGUOUS_ANY,
         outputs_storage=[u.WIDTH_PACKED_TEXTURE, u.WIDTH_PACKED_TEXTURE], supports_resize=True)

# Q8taBinary.cpp, Q8taUnary.cpp, Q8taPixelShuffle.cpp
register(["et_vk::q8ta_add"], inputs_storage=u.PACKED_INT8_BUFFER)
register(["et_vk::q8ta_relu"], inputs_storage=u.PACKED_INT8_BUFFER, supports_resize=True)
register(["et_vk::q8ta_pixel_shuffle"], inputs_storage=u.PACKED_INT8_CHANNELS_PACKED_BUFFER,
         supports_resize=True)


# ---- reductions (Reduce.cpp, ArgReduce.cpp) ----------------------------------------------

def get_dims_reduced(node: torch.fx.Node):
    """The reduced dims, non-negative: an int for one dim, a list for several."""
    ndim = u.ndim_of(node.args[0])
    dims = node.args[1] if len(node.args) >= 2 else None
    if dims is None:
        dims = list(range(ndim))
        if u.is_unsqueezed_vector(node) and ndim == 2:  # [1, N]: the same as the last dim
            dims = 1
    if isinstance(dims, (list, tuple)) and len(dims) == 1:
        dims = dims[0]
    return u.normalize_dims(dims, ndim)


def get_keepdim_setting(node: torch.fx.Node) -> bool:
    return next((a for a in node.args if isinstance(a, bool)), False)


def is_reduce_node_supported_by_per_row_impl(node: torch.fx.Node) -> bool:
    return get_dims_reduced(node) == u.ndim_of(node.args[0]) - 1


def is_reduce_node_supported_by_general_impl(node: torch.fx.Node) -> bool:
    """At most two reduced dims, with keepdim."""
    dims = get_dims_reduced(node)
    if isinstance(dims, (list, tuple)) and len(dims) > 2:
        return False
    return get_keepdim_setting(node) is not False


def is_reduce_node_supported(node: torch.fx.Node) -> bool:
    return (is_reduce_node_supported_by_per_row_impl(node)
            or is_reduce_node_supported_by_general_impl(node))


def pick_storage_for_reduce(node: torch.fx.Node):
    """Any texture for the general shader; a contiguous buffer too for a reduction of the
    last dim (the per-row shader); a 2-dim reduction must pack the one dim it keeps."""
    ins = outs = u.NO_STORAGE
    ndim = u.ndim_of(node.args[0])
    dims = get_dims_reduced(node)
    if is_reduce_node_supported_by_general_impl(node):
        ins = ins.make_union(u.ANY_TEXTURE)
        outs = ins
    if is_reduce_node_supported_by_per_row_impl(node):
        ins = ins.make_union(u.CONTIGUOUS_BUFFER)
        return ins, ins
    if isinstance(dims, (list, tuple)) and len(dims) == 2:
        kept = {0, 1, 2} - {u.nchw_dim_to_whcn_dim(d, ndim) for d in dims}
        packed = kept.pop()
        ins = outs = (u.WIDTH_PACKED_TEXTURE, u.HEIGHT_PACKED_TEXTURE,
                      u.CHANNELS_PACKED_TEXTURE)[packed]
    return ins, outs


register([A.mean.dim, A.sum.dim_IntList, A.amax.default, A.amin.default],
         inputs_storage=u.ANY_TEXTURE, inputs_dtypes=u.FP_T, supports_resize=True,
         supports_highdim=True, are_node_inputs_supported_fn=is_reduce_node_supported,
         pick_io_storage_fn=pick_storage_for_reduce)
register([A.argmax.default, A.argmin.default], inputs_storage=u.ANY_STORAGE,
         inputs_dtypes=u.FP_T, outputs_dtypes=u.INT_T, supports_resize=True,
         supports_highdim=True, are_node_inputs_supported_fn=is_reduce_node_supported,
         pick_io_storage_fn=pick_storage_for_reduce)

# Pool.cpp
register([A.avg_pool2d.default, A.max_pool2d.default], inputs_storage=u.CHANNELS_PACKED_TEXTURE,
         inputs_dtypes=u.FP_T, supports_resize=True)
register([A.max_pool2d_with_indices.default], inputs_storage=u.CHANNELS_PACKED_TEXTURE,
         inputs_dtypes=u.FP_T, outputs_dtypes=[u.FP_T, u.INT_T], supports_resize=True)


# ---- convolutions (Convolution.cpp, Q8taConv2d*.cpp) ------------------------------------

def _check_conv_node(node: torch.fx.Node) -> bool:
    """2-D: batch 1 only; 1-D: not transposed."""
    shape = node.args[0].meta["val"].size()
    if len(shape) == 4 and shape[0] != 1:
        return False
    return not (len(shape) == 3 and node.args[6])


def _pick_conv_storage(node: torch.fx.Node):
    """Channels-packed textures; a pointwise or depthwise 1-D convolution height-packed ones."""
    shape = node.args[0].meta["val"].size()
    storage = u.CHANNELS_PACKED_TEXTURE
    if len(shape) == 3:
        w = node.args[1].meta["val"].size()
        groups = node.args[8]
        depthwise = isinstance(groups, int) and groups == shape[1] == w[0] and w[1] == 1
        if w[2] == 1 or depthwise:
            storage = u.HEIGHT_PACKED_TEXTURE
    return [storage] + [u.NO_STORAGE] * 10, storage


register([A.convolution.default, VK.conv_with_clamp.default],
         inputs_storage=[u.CHANNELS_PACKED_TEXTURE] + [u.NO_STORAGE] * 10,
         inputs_dtypes=u.FP_T, supports_resize=True, supports_prepacking=True,
         are_node_inputs_supported_fn=_check_conv_node, pick_io_storage_fn=_pick_conv_storage)

_Q8 = [u.NO_STORAGE] * 14  # scales, zero points, prepacked weights, sizes
register(["et_vk::q8ta_conv2d_pw"], inputs_storage=[u.PACKED_INT8_4W4C_BUFFER] + _Q8,
         outputs_storage=[u.PACKED_INT8_CHANNELS_PACKED_BUFFER], supports_prepacking=True)
register(["et_vk::q8ta_conv2d", "et_vk::q8ta_conv2d_dw"],
         inputs_storage=[u.PACKED_INT8_CONV2D_BUFFER] + _Q8,
         outputs_storage=[u.PACKED_INT8_CHANNELS_PACKED_BUFFER], supports_prepacking=True)
register(["et_vk::q8ta_conv2d_transposed"],
         inputs_storage=[u.PACKED_INT8_CONV2D_BUFFER] + [u.NO_STORAGE] * 15,
         outputs_storage=[u.PACKED_INT8_CHANNELS_PACKED_BUFFER], supports_prepacking=True)

# Q8taLinear.cpp
register(["et_vk::q8ta_linear"], inputs_storage=[u.PACKED_INT8_4H4W_BUFFER] + _Q8[:9],
         outputs_storage=[u.PACKED_INT8_4H4W_BUFFER], supports_prepacking=True)
register(["et_vk::q8ta_linear_gemv"], inputs_storage=[u.PACKED_INT8_4W_BUFFER] + _Q8[:9],
         outputs_storage=[u.PACKED_INT8_4W_BUFFER], supports_prepacking=True)

# SDPA.cpp, RotaryEmbedding.cpp
register(["llama::sdpa_with_kv_cache"], inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T,
         supports_resize=True, supports_prepacking=True)
register(["llama::update_cache", "llama::custom_sdpa", "et_vk::sdpa"],
         inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T, supports_resize=True)
register(["et_vk::apply_rotary_emb", "et_vk::apply_rotary_emb_hf"],
         inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T, supports_resize=True,
         supports_highdim=True)
# freqs_cis as a buffer: the shader addresses it as a flat [N, C] whatever its rank.
register(["et_vk::apply_rotary_emb_interleaved"],
         inputs_storage=[u.CONTIGUOUS_ANY, u.CONTIGUOUS_BUFFER], inputs_dtypes=u.FP_T,
         supports_resize=True, supports_highdim=True)

# ---- data movement --------------------------------------------------------------------
register([A.permute.default], inputs_storage=u.ANY_TEXTURE, inputs_dtypes=u.FP_INT_BOOL_T,
         supports_resize=True)
_MOVE = dict(inputs_dtypes=u.FP_INT_BOOL_T, supports_resize=True, supports_highdim=True)
register([A.permute_copy.default, A.squeeze_copy.dims, A.unsqueeze_copy.default,
          A.gather.default, A.select_copy.int, A.slice_copy.Tensor,
          A.split_with_sizes_copy.default], inputs_storage=u.ANY_STORAGE, **_MOVE)
register([A.view_copy.default, A.clone.default, E.dim_order_ops._clone_dim_order.default,
          # removed before the graph is built; delegated so it does not split partitions
          A.alias_copy.default],
         inputs_storage=u.ANY_STORAGE_INCL_PACKED_INT8, **_MOVE)
register([E.dim_order_ops._to_dim_order_copy.default], inputs_storage=u.ANY_BUFFER, **_MOVE)
register([A.unfold_copy.default], inputs_storage=u.ANY_BUFFER, inputs_dtypes=u.FP_T,
         supports_resize=True, supports_highdim=True)
register([A.expand_copy.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_BOOL_T,
         supports_highdim=True)
register([A.cat.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T,
         supports_resize=True)
register([A.t_copy.default, A.flip.default, A.index_select.default],
         inputs_storage=u.CHANNELS_PACKED_TEXTURE, inputs_dtypes=u.FP_INT_BOOL_T)
register([A.where.self], inputs_storage=u.ANY_STORAGE,
         inputs_dtypes=[u.BOOL_T, u.FP_T, u.FP_T], outputs_dtypes=u.FP_T, supports_resize=True)


def _index_tensor_shapes(node: torch.fx.Node):
    """``(self, index, dim)`` when exactly one index tensor is given, else None."""
    src, indices = node.args[0], node.args[1]
    if not isinstance(src, torch.fx.Node) or not isinstance(indices, (list, tuple)):
        return None
    src_val = src.meta.get("val")
    if src_val is None:
        return None
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(given) != 1:
        return None
    dim, index = given[0]
    if dim >= len(src_val.size()) or not isinstance(index, torch.fx.Node):
        return None
    index_val = index.meta.get("val")
    return None if index_val is None else (src_val, index_val, dim)


def _check_index_tensor(node: torch.fx.Node) -> bool:
    shapes = _index_tensor_shapes(node)
    return shapes is not None and len(shapes[1].size()) == 1  # one index per output slice


def _pick_index_tensor_storage(node: torch.fx.Node):
    shapes = _index_tensor_shapes(node)
    if shapes is not None and len(shapes[0].size()) > 1:  # only the buffer shader does that
        return u.CONTIGUOUS_BUFFER, u.CONTIGUOUS_BUFFER
    return u.ANY_STORAGE, u.ANY_STORAGE


register([A.index.Tensor], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T,
         supports_resize=True, are_node_inputs_supported_fn=_check_index_tensor,
         pick_io_storage_fn=_pick_index_tensor_storage)
register([A.arange.start_step], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T,
         supports_resize=True)
register([A.constant_pad_nd.default], inputs_storage=u.ANY_STORAGE,
         inputs_dtypes=u.FP_INT_BOOL_T, supports_resize=True)
register([A.full.default, A.full_like.default, A.ones.default, A.ones_like.default,
          A.zeros.default, A.zeros_like.default], inputs_storage=u.ANY_STORAGE,
         inputs_dtypes=u.FP_INT_BOOL_T)
register([A.scalar_tensor.default], inputs_storage=u.CHANNELS_PACKED_TEXTURE,
         inputs_dtypes=u.FP_INT_T, supports_resize=True)
register([A.upsample_nearest2d.vec, A.upsample_bilinear2d.vec],
         inputs_storage=u.CHANNELS_PACKED_TEXTURE, inputs_dtypes=u.FP_T)
register([A.pixel_shuffle.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_T,
         supports_resize=True)
register(["et_vk::grid_priors"], inputs_storage=u.CHANNELS_PACKED_TEXTURE,
         inputs_dtypes=u.FP_T)


def _literal(arg: object) -> object:
    """A plain value from a literal, a node's value, or an int-like; None when unsure."""
    if isinstance(arg, (bool, int, float)):
        return arg
    if isinstance(arg, torch.fx.Node):
        val = arg.meta.get("val")
        return val if isinstance(val, (bool, int, float)) else None
    try:
        return int(arg)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _check_grid_sampler_2d(node: torch.fx.Node) -> bool:
    """Only what the shader does (RIFE's warp): bilinear, border padding, align_corners;
    anything else stays on the CPU instead of failing the graph build."""
    if len(node.args) < 5:
        return False
    mode, padding, corners = (_literal(a) for a in node.args[2:5])
    if mode is None or padding is None or corners is None:
        return False
    return mode == 0 and padding == 1 and bool(corners) is True


register([A.grid_sampler_2d.default],
         inputs_storage=[u.CHANNELS_PACKED_TEXTURE, u.CONTIGUOUS_BUFFER], inputs_dtypes=u.FP_T,
         supports_resize=True, are_node_inputs_supported_fn=_check_grid_sampler_2d)
register([A.repeat.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_BOOL_T)


def _weight_fits_buffer(node: torch.fx.Node) -> bool:
    w = node.args[0]
    return not (isinstance(w, torch.fx.Node) and u.is_tensor_node(w)
                and w.meta["val"].numel() > u.DEFAULT_BUFFER_LIMIT)


register([A.embedding.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=[u.FP_T, u.INT_T],
         supports_prepacking=True, supports_resize=True,
         are_node_inputs_supported_fn=_weight_fits_buffer)
register(["quantized_decomposed::embedding_4bit.dtype"], inputs_storage=u.ANY_BUFFER, supports_prepacking=True,
         supports_resize=True, are_node_inputs_supported_fn=_weight_fits_buffer)
register(["et_vk::embedding_q4gsw"], inputs_storage=u.CONTIGUOUS_ANY,
         supports_prepacking=True, supports_resize=True)

# Normalisations
register([A._native_batch_norm_legit_no_training.default],
         inputs_storage=u.CHANNELS_PACKED_TEXTURE, inputs_dtypes=u.FP_T,
         supports_prepacking=True, supports_resize=True)
register([A.native_group_norm.default], inputs_storage=u.CHANNELS_PACKED_TEXTURE,
         inputs_dtypes=u.FP_T,
         outputs_storage=[u.CHANNELS_PACKED_TEXTURE, u.CONTIGUOUS_BUFFER, u.CONTIGUOUS_BUFFER],
         supports_prepacking=True)
register([A.native_layer_norm.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_T,
         supports_prepacking=True, supports_resize=True)
register([VK.rms_norm.default], inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T,
         supports_prepacking=True, supports_resize=True)

# Training (FusedCe.cpp and friends)
register(["et_vk::fused_ce"], inputs_storage=u.CONTIGUOUS_ANY,
         inputs_dtypes=[u.FP_T, u.INT_T, u.NONE_T], outputs_dtypes=[u.FP_T, u.FP_T])
register([A.ne.Scalar, A.lt.Scalar, A.le.Scalar, A.ge.Scalar, A.gt.Scalar],
         inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.FP_INT_T, outputs_dtypes=u.BOOL_T,
         supports_resize=True, supports_highdim=True)
register([A.logical_not.default], inputs_storage=u.ANY_STORAGE, inputs_dtypes=u.BOOL_T,
         supports_resize=True, supports_highdim=True)
register(["et_vk::adamw_step"], inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T)
register(["et_vk::linear_dW"], inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T,
         supports_prepacking=True)
register(["et_vk::q4gsw_requant"], inputs_storage=u.CONTIGUOUS_ANY, inputs_dtypes=u.FP_T)
