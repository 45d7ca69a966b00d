"""Which dtypes each portable kernel supports: the one table that the kernel tests run, the
operator documentation prints, and the exporter enforces (``edgetorch.exir.dtype_support``).

An entry describes the dtype of one argument of the operator, its *key* argument: the first
tensor argument of its schema (``self``, ``input``, ``weight``, the list of ``cat``...), or
``out`` for creation ops that take no tensor. ``arg`` names it where that rule would pick the
wrong one. The sets follow what torch itself accepts on CPU for that argument (for example,
``gelu`` is floating point only, ``add`` takes every dtype, ``sub`` every dtype but bool); the
kernel tests run every listed dtype against torch and check that torch rejects the others.

torch-free on purpose: the runtime imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schema.scalar_type import ScalarType as S

FLOAT = frozenset({S.FLOAT, S.DOUBLE, S.HALF, S.BFLOAT16})
INT = frozenset({S.BYTE, S.CHAR, S.SHORT, S.INT, S.LONG})
REAL = FLOAT | INT
ALL = REAL | {S.BOOL}
INT_BOOL = INT | {S.BOOL}
INDEX = frozenset({S.INT, S.LONG})
NONE: frozenset[S] = frozenset()

# The dtypes the kernel library is tested on, in the order the documentation prints them.
DTYPES = (S.FLOAT, S.DOUBLE, S.HALF, S.BFLOAT16, S.CHAR, S.SHORT, S.INT, S.LONG, S.BYTE, S.BOOL)


@dataclass(frozen=True)
class DtypeSupport:
    """The dtypes an operator's kernel accepts for its key argument."""

    dtypes: frozenset[S]
    arg: str | None = None  # None: the first tensor argument of the schema ("out" if none)
    note: str = ""


SUPPORT: dict[str, DtypeSupport] = {}


def _add(dtypes: frozenset[S], *names: str, arg: str | None = None, note: str = "") -> None:
    for name in names:
        if name in SUPPORT:
            raise ValueError(f"{name} is declared twice")
        SUPPORT[name] = DtypeSupport(frozenset(dtypes), arg, note)


def _aten(*names: str) -> list[str]:
    return [f"aten::{n}" for n in names]


# ---- elementwise -----------------------------------------------------------------------

_add(ALL, *_aten(
    "exp.out", "expm1.out", "log.out", "log1p.out", "log2.out", "log10.out", "sqrt.out",
    "rsqrt.out", "reciprocal.out", "sigmoid.out", "tanh.out", "erf.out", "sin.out", "cos.out",
    "tan.out", "asin.out", "acos.out", "atan.out", "sinh.out", "cosh.out", "asinh.out",
    "acosh.out", "atanh.out", "logit.out",
), note="integer and bool inputs compute in float32")
_add(REAL, *_aten("abs.out", "neg.out", "floor.out", "ceil.out", "round.out", "trunc.out",
                  "relu.out", "hardtanh.out"))
_add(ALL, *_aten("sign.out", "logical_not.out", "isnan.out", "isinf.out"))
_add(INT_BOOL, *_aten("bitwise_not.out"))
_add(FLOAT, *_aten("gelu.out", "silu.out", "hardswish.out", "hardsigmoid.out", "leaky_relu.out",
                   "elu.out", "glu.out"))

_add(ALL, *_aten("add.out", "add.Scalar_out", "mul.out", "mul.Scalar_out", "div.out",
                 "div.Scalar_out", "minimum.out", "maximum.out", "atan2.out"))
_add(REAL, *_aten("sub.out", "sub.Scalar_out", "rsub.Scalar_out"), note="bool: use logical_xor")
_add(REAL, *_aten("floor_divide.out", "remainder.Tensor_out", "fmod.Tensor_out",
                  "pow.Tensor_Tensor_out"))
_add(ALL, *_aten("div.out_mode", "div.Scalar_mode_out"),
     note="bool only with rounding_mode=None (as torch)")
_add(ALL, *_aten("remainder.Scalar_out", "fmod.Scalar_out", "pow.Tensor_Scalar_out",
                 "pow.Scalar_out"))
_add(INT_BOOL, *_aten("bitwise_and.Tensor_out", "bitwise_and.Scalar_out", "bitwise_or.Tensor_out",
                      "bitwise_or.Scalar_out", "bitwise_xor.Tensor_out", "bitwise_xor.Scalar_out"))
_add(INT, *_aten("bitwise_left_shift.Tensor_out", "bitwise_right_shift.Tensor_out"))
_add(INT_BOOL, *_aten("bitwise_left_shift.Tensor_Scalar_out", "bitwise_right_shift.Tensor_Scalar_out"),
     note="bool shifted by an int promotes to int64")
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    _add(ALL, f"aten::{_op}.Tensor_out", f"aten::{_op}.Scalar_out")
_add(ALL, *_aten("logical_and.out", "logical_or.out", "logical_xor.out", "clamp.out",
                 "clamp.Tensor_out"))
_add(ALL, "aten::where.self_out", arg="self")

# ---- reductions --------------------------------------------------------------------------

_add(ALL, *_aten("sum.IntList_out", "prod.int_out", "prod.out", "amax.out", "amin.out",
                 "max.dim_max", "max.unary_out", "min.dim_min", "min.unary_out", "any.out",
                 "any.dims_out", "any.all_out", "cumsum.out"))
_add(ALL, *_aten("mean.out", "mean.dtype_out"),
     note="integer and bool inputs need a floating dtype= (as torch)")
_add(REAL, *_aten("argmax.out", "argmin.out", "topk.values"))
_add(ALL, *_aten("sort.values", "sort.values_stable"))
_add(FLOAT, *_aten("var.correction_out", "std.correction_out", "var_mean.correction_out",
                   "var.out", "_softmax.out", "_log_softmax.out"))

# ---- linear algebra and neural networks --------------------------------------------------

_add(REAL, *_aten("mm.out", "bmm.out", "addmm.out", "linear.out"),
     note="floats through BLAS; integers exact, wrapping on overflow")
_add(REAL, "aten::convolution.out",
     note="integers: torch runs only some configurations (no dilation for int8-int32, uint8)")
_add(FLOAT | {S.LONG}, "aten::convolution_backward.out",
     note="int64: torch computes only some configurations (dilated)")
_add(FLOAT, *_aten("_native_batch_norm_legit_no_training.out",
                   "_native_batch_norm_legit.out", "_native_batch_norm_legit.no_stats_out",
                   "native_layer_norm.out", "native_group_norm.out", "_adaptive_avg_pool2d.out",
                   "max_pool2d_with_indices_backward.grad_input", "grid_sampler_2d.out"))
_add(FLOAT - {S.HALF, S.BFLOAT16}, "aten::_pdist_forward.out")
_add(FLOAT, "aten::_cdist_forward.out",
     note="half/bfloat16 only where torch takes the matrix-product path (p=2, > 25 rows)")
_add(frozenset({S.FLOAT, S.DOUBLE}), "aten::_fft_r2c.out",
     note="complex64/complex128 out; onesided=False too (ExecuTorch's kernel refuses it)")
_add(frozenset({S.FLOAT, S.DOUBLE}), "aten::_fft_c2r.out", arg="out",
     note="complex64/complex128 input")
_add(REAL, "aten::max_pool2d_with_indices.out")
_add(FLOAT | {S.LONG}, "aten::avg_pool2d.out")
_add(FLOAT | {S.BYTE}, *_aten("upsample_nearest2d.vec_out", "upsample_bilinear2d.vec_out"),
     note="uint8 bilinear rounds to nearest; torch's two CPU paths may differ by 1")
_add(frozenset({S.FLOAT, S.DOUBLE, S.BYTE}), "aten::_upsample_bilinear2d_aa.out",
     note="uint8 rounds to nearest; torch's fixed-point path may differ by 1")
_add(ALL, "aten::constant_pad_nd.out")
_add(REAL, *_aten("reflection_pad1d.out", "reflection_pad2d.out", "reflection_pad3d.out",
                  "replication_pad1d.out", "replication_pad2d.out", "replication_pad3d.out"))
_add(ALL, "aten::native_dropout.out",
     note="random: a fresh mask per call; integer and bool only with train=False (as torch)")

# ---- indexing ----------------------------------------------------------------------------

_add(ALL, *_aten("embedding.out", "index_select.out", "index.Tensor_out", "index_put.out",
                 "index_put_", "gather.out", "scatter.src_out", "scatter.value_out",
                 "scatter_add.out", "masked_fill.Scalar_out", "masked_select.out",
                 "masked_scatter.out", "nonzero.out"))
_add(INDEX, "aten::repeat_interleave.Tensor_out")

# ---- shape and copies --------------------------------------------------------------------

_add(ALL, *_aten(
    "clone.out", "alias_copy.out", "detach_copy.out", "lift_fresh_copy.out", "_to_copy.out",
    "copy.out", "copy_", "view_copy.out", "permute_copy.out", "expand_copy.out", "t_copy.out",
    "transpose_copy.int_out", "unsqueeze_copy.out", "squeeze_copy.dim_out",
    "squeeze_copy.dims_out", "squeeze_copy.out", "slice_copy.Tensor_out", "select_copy.int_out",
    "narrow_copy.out", "diagonal_copy.out", "as_strided_copy.out", "unfold_copy.out", "cat.out",
    "stack.out", "split_with_sizes_copy.out", "split_copy.Tensor_out", "unbind_copy.int_out",
    "flip.out", "roll.out", "repeat.out", "tril.out", "triu.out", "pixel_shuffle.out",
    "pixel_unshuffle.out", "select_scatter.out", "slice_scatter.out", "_conj_physical.out",
))
_add(NONE, "aten::view_as_real_copy.out", note="complex64/complex128 inputs only")
_add(ALL, "et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out", note="host memory: a copy")

# ---- creation ----------------------------------------------------------------------------

_add(ALL, *_aten("full.out", "full_like.out", "fill.Scalar_out", "fill.Tensor_out", "zeros.out",
                 "ones.out", "empty.out", "scalar_tensor.out", "arange.start_out", "arange.out"))
_add(FLOAT, *_aten("rand.out", "randn.out"), note="random: NumPy's generator, not torch's stream")

# ---- ExecuTorch's own operators ----------------------------------------------------------

_add(ALL, "dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_clone_dim_order.out",
     "dim_order_ops::_empty_dim_order.out", "executorch_prim::et_view.default",
     "executorch_prim::et_copy_index.tensor")
_add(ALL, *_aten("sym_size.int", "sym_numel", "_local_scalar_dense"))

# ---- ExecuTorch's quantized library (kernels/quantized/quantized.yaml) -------------------
# (key arguments named: their torch schemas exist only once edgetorch.exir is imported)

QUANTIZED_INT = frozenset({S.BYTE, S.CHAR, S.SHORT, S.INT, S.UINT16})


def _q(*names: str) -> list[str]:
    return [f"quantized_decomposed::{n}" for n in names]


_add(FLOAT, *_q("quantize_per_tensor.out", "quantize_per_tensor.Tensor_out",
                "quantize_per_channel.out", "quantize_per_token.out"), arg="input",
     note="float32 reciprocal multiply, round half to even (ExecuTorch's numerics)")
_add(QUANTIZED_INT, *_q("dequantize_per_tensor.out", "dequantize_per_tensor.Tensor_out",
                        "dequantize_per_channel.out", "dequantize_per_token.out"),
     arg="input", note="also uint16; computes in float32, then casts to the output dtype")
_add(frozenset({S.FLOAT}), *_q("choose_qparams.Tensor_out",
                               "choose_qparams_per_token_asymmetric.out"),
     arg="input", note="eps ignored: scales below 6.1e-5 are raised to it (as ExecuTorch)")
_add(frozenset({S.BYTE, S.CHAR}), *_q("embedding_byte.out", "embedding_byte.dtype_out"),
     arg="weight")
_add(frozenset({S.BYTE}), *_q("embedding_4bit.out", "embedding_4bit.dtype_out",
                              "embedding_2bit.out", "embedding_2bit.dtype_out"),
     arg="weight", note="packed: two (4-bit) or four (2-bit) values per byte")
_add(INT, "quantized_decomposed::add.out", arg="a",
     note="quant ranges within [0, 255]; no broadcasting")
_add(frozenset({S.FLOAT, S.HALF}), *_q("mixed_mm.out", "mixed_linear.out"), arg="input",
     note="int8 weight; accumulates term by term in the output dtype")
_add(frozenset({S.FLOAT, S.HALF, S.BFLOAT16}), "llama::custom_sdpa.out",
     "llama::sdpa_with_kv_cache.out", arg="query", note="scores and softmax in float32")
_add(frozenset({S.FLOAT, S.HALF, S.BFLOAT16}), "llama::update_cache.out", arg="value")
# ExecuTorch's aot_arm_compiler rewrites the CPU-side Q/DQ into these (backends/arm/runtime).
_add(FLOAT, "cortex_m::quantize_per_tensor.out", arg="input",
     note="as quantized_decomposed::quantize_per_tensor")
_add(QUANTIZED_INT, "cortex_m::dequantize_per_tensor.out", arg="input",
     note="as quantized_decomposed::dequantize_per_tensor; float32 out")
# The Cortex-M (CMSIS-NN) operators of ExecuTorch's cortex_m library (kernels/cortex_m): int8
# tensors only, their key argument the first tensor of the schema (input, self or lhs).
_add(frozenset({S.CHAR}), *(f"cortex_m::{n}.out" for n in (
    "quantized_conv2d", "quantized_conv2d_nhwc", "quantized_depthwise_conv2d",
    "quantized_depthwise_conv2d_nhwc", "quantized_transpose_conv2d",
    "quantized_transpose_conv2d_nhwc", "quantized_add", "quantized_mul", "quantized_div",
    "quantized_activation", "minimum", "maximum", "transpose", "pad", "quantized_linear",
    "quantized_batch_matmul", "quantized_avg_pool2d", "quantized_avg_pool2d_nhwc",
    "quantized_max_pool2d", "quantized_max_pool2d_nhwc", "softmax")),
     note="int8 only (CMSIS-NN's s8 kernels)")

# ---- what ExecuTorch ships ---------------------------------------------------------------

# Operators ExecuTorch 1.5.1's runtime registers from its optimized library alone (no portable
# kernel): kernels/optimized/optimized.yaml. Its pybindings report them with the portable set.
EXECUTORCH_OPTIMIZED_ONLY = frozenset({"aten::_fft_c2r.out", "aten::_fft_r2c.out", "aten::linear.out"})

# The operators of ExecuTorch 1.5's portable kernel library, as the .pte names them:
# kernels/portable/functions.yaml (identical at 1.5.1 and the mirror's HEAD) plus the prim ops
# of kernels/prim_ops/register_prim_ops.cpp and et_copy_index.
EXECUTORCH_PORTABLE = frozenset({
    "aten::_adaptive_avg_pool2d.out", "aten::_cdist_forward.out", "aten::_conj_physical.out",
    "aten::_log_softmax.out", "aten::_native_batch_norm_legit.no_stats_out",
    "aten::_native_batch_norm_legit.out", "aten::_native_batch_norm_legit_no_training.out",
    "aten::_pdist_forward.out", "aten::_softmax.out", "aten::_to_copy.out",
    "aten::_upsample_bilinear2d_aa.out", "aten::abs.out", "aten::acos.out", "aten::acosh.out",
    "aten::add.Scalar_out", "aten::add.out", "aten::addmm.out", "aten::alias_copy.out",
    "aten::amax.out", "aten::amin.out", "aten::any.all_out", "aten::any.dims_out",
    "aten::any.out", "aten::arange.out", "aten::arange.start_out", "aten::argmax.out",
    "aten::argmin.out", "aten::as_strided_copy.out", "aten::asin.out", "aten::asinh.out",
    "aten::atan.out", "aten::atan2.out", "aten::atanh.out", "aten::avg_pool2d.out",
    "aten::bitwise_and.Scalar_out", "aten::bitwise_and.Tensor_out",
    "aten::bitwise_left_shift.Tensor_Scalar_out", "aten::bitwise_left_shift.Tensor_out",
    "aten::bitwise_not.out", "aten::bitwise_or.Scalar_out", "aten::bitwise_or.Tensor_out",
    "aten::bitwise_right_shift.Tensor_Scalar_out", "aten::bitwise_right_shift.Tensor_out",
    "aten::bitwise_xor.Scalar_out", "aten::bitwise_xor.Tensor_out", "aten::bmm.out",
    "aten::cat.out", "aten::ceil.out", "aten::clamp.Tensor_out", "aten::clamp.out",
    "aten::clone.out", "aten::constant_pad_nd.out", "aten::convolution.out",
    "aten::convolution_backward.out", "aten::copy.out", "aten::copy_", "aten::cos.out",
    "aten::cosh.out", "aten::cumsum.out", "aten::detach_copy.out", "aten::diagonal_copy.out",
    "aten::div.Scalar_mode_out", "aten::div.Scalar_out", "aten::div.out", "aten::div.out_mode",
    "aten::elu.out", "aten::embedding.out", "aten::empty.out", "aten::eq.Scalar_out",
    "aten::eq.Tensor_out", "aten::erf.out", "aten::exp.out", "aten::expand_copy.out",
    "aten::expm1.out", "aten::fill.Scalar_out", "aten::fill.Tensor_out", "aten::flip.out",
    "aten::floor.out", "aten::floor_divide.out", "aten::fmod.Scalar_out", "aten::fmod.Tensor_out",
    "aten::full.out", "aten::full_like.out", "aten::gather.out", "aten::ge.Scalar_out",
    "aten::ge.Tensor_out", "aten::gelu.out", "aten::glu.out", "aten::grid_sampler_2d.out",
    "aten::gt.Scalar_out", "aten::gt.Tensor_out", "aten::hardtanh.out", "aten::index.Tensor_out",
    "aten::index_put.out", "aten::index_put_", "aten::index_select.out", "aten::isinf.out",
    "aten::isnan.out", "aten::le.Scalar_out", "aten::le.Tensor_out", "aten::leaky_relu.out",
    "aten::lift_fresh_copy.out", "aten::log.out", "aten::log10.out", "aten::log1p.out",
    "aten::log2.out", "aten::logical_and.out", "aten::logical_not.out", "aten::logical_or.out",
    "aten::logical_xor.out", "aten::logit.out", "aten::lt.Scalar_out", "aten::lt.Tensor_out",
    "aten::masked_fill.Scalar_out", "aten::masked_scatter.out", "aten::masked_select.out",
    "aten::max.dim_max", "aten::max.unary_out", "aten::max_pool2d_with_indices.out",
    "aten::max_pool2d_with_indices_backward.grad_input", "aten::maximum.out",
    "aten::mean.dtype_out", "aten::mean.out", "aten::min.dim_min", "aten::min.unary_out",
    "aten::minimum.out", "aten::mm.out", "aten::mul.Scalar_out", "aten::mul.out",
    "aten::narrow_copy.out", "aten::native_dropout.out", "aten::native_group_norm.out",
    "aten::native_layer_norm.out", "aten::ne.Scalar_out", "aten::ne.Tensor_out", "aten::neg.out",
    "aten::nonzero.out", "aten::ones.out", "aten::permute_copy.out", "aten::pixel_shuffle.out",
    "aten::pixel_unshuffle.out", "aten::pow.Scalar_out", "aten::pow.Tensor_Scalar_out",
    "aten::pow.Tensor_Tensor_out", "aten::prod.int_out", "aten::prod.out", "aten::rand.out",
    "aten::randn.out", "aten::reciprocal.out", "aten::reflection_pad1d.out",
    "aten::reflection_pad2d.out", "aten::reflection_pad3d.out", "aten::relu.out",
    "aten::remainder.Scalar_out", "aten::remainder.Tensor_out", "aten::repeat.out",
    "aten::repeat_interleave.Tensor_out", "aten::replication_pad1d.out",
    "aten::replication_pad2d.out", "aten::replication_pad3d.out", "aten::roll.out",
    "aten::round.out", "aten::rsqrt.out", "aten::rsub.Scalar_out", "aten::scalar_tensor.out",
    "aten::scatter.src_out", "aten::scatter.value_out", "aten::scatter_add.out",
    "aten::select_copy.int_out", "aten::select_scatter.out", "aten::sigmoid.out",
    "aten::sign.out", "aten::sin.out", "aten::sinh.out", "aten::slice_copy.Tensor_out",
    "aten::slice_scatter.out", "aten::split_copy.Tensor_out", "aten::split_with_sizes_copy.out",
    "aten::sqrt.out", "aten::squeeze_copy.dim_out", "aten::squeeze_copy.dims_out",
    "aten::stack.out", "aten::sub.Scalar_out", "aten::sub.out", "aten::sum.IntList_out",
    "aten::t_copy.out", "aten::tan.out", "aten::tanh.out", "aten::topk.values",
    "aten::transpose_copy.int_out", "aten::tril.out", "aten::trunc.out",
    "aten::unbind_copy.int_out", "aten::unfold_copy.out", "aten::unsqueeze_copy.out",
    "aten::upsample_bilinear2d.vec_out", "aten::upsample_nearest2d.vec_out",
    "aten::var.correction_out", "aten::var.out", "aten::var_mean.correction_out",
    "aten::view_as_real_copy.out", "aten::view_copy.out", "aten::where.self_out",
    "aten::zeros.out", "dim_order_ops::_clone_dim_order.out",
    "dim_order_ops::_empty_dim_order.out", "dim_order_ops::_to_dim_order_copy.out",
    "et_copy::_d2h_copy.out", "et_copy::_h2d_copy.out",
})
EXECUTORCH_PRIM = frozenset({
    "aten::_local_scalar_dense", "aten::sym_numel", "aten::sym_size.int",
    "executorch_prim::add.Scalar", "executorch_prim::ceil.Scalar", "executorch_prim::eq.Scalar",
    "executorch_prim::et_copy_index.tensor", "executorch_prim::et_view.default",
    "executorch_prim::floordiv.Scalar", "executorch_prim::floordiv.int",
    "executorch_prim::ge.Scalar", "executorch_prim::gt.Scalar", "executorch_prim::le.Scalar",
    "executorch_prim::lt.Scalar", "executorch_prim::mod.Scalar", "executorch_prim::mod.int",
    "executorch_prim::mul.Scalar", "executorch_prim::neg.Scalar", "executorch_prim::round.Scalar",
    "executorch_prim::sub.Scalar", "executorch_prim::sym_float.Scalar",
    "executorch_prim::sym_int.Scalar", "executorch_prim::sym_ite.Scalar",
    "executorch_prim::sym_max.Scalar", "executorch_prim::sym_min.Scalar",
    "executorch_prim::sym_not.Scalar", "executorch_prim::truediv.Scalar",
    "executorch_prim::trunc.Scalar",
})

# ExecuTorch 1.5.1's quantized library (kernels/quantized/quantized.yaml): 19 kernels.
EXECUTORCH_QUANTIZED = frozenset(_q(
    "add.out", "choose_qparams.Tensor_out", "choose_qparams_per_token_asymmetric.out",
    "dequantize_per_channel.out", "dequantize_per_tensor.out",
    "dequantize_per_tensor.Tensor_out", "dequantize_per_token.out", "embedding_2bit.dtype_out",
    "embedding_2bit.out", "embedding_4bit.dtype_out", "embedding_4bit.out",
    "embedding_byte.dtype_out", "embedding_byte.out", "mixed_linear.out", "mixed_mm.out",
    "quantize_per_channel.out", "quantize_per_tensor.out", "quantize_per_tensor.Tensor_out",
    "quantize_per_token.out",
))

# Operators of those lists with no kernel here, and why (the documentation prints them).
LEFT_OUT: dict[str, str] = {}

# What the kernel library deliberately does not cover, beyond single operators.
NOT_COVERED: dict[str, str] = {
    "complex dtypes": "only the FFT operators, _conj_physical and view_as_real_copy take "
    "complex64/complex128 (scalar_type.fbs comments COMPLEX* out, but ExecuTorch's emitter "
    "writes COMPLEX64 = 9 for rfft's result and its runtime runs it); complex32 has no NumPy "
    "dtype",
    "uint16/uint32/uint64, float8, quantized dtypes": "torch has almost no CPU kernels for "
    "them; only copies and conversions see them",
}


def supported(name: str) -> DtypeSupport | None:
    """The declared dtype support of operator ``name`` (None: not declared, e.g. user ops)."""
    return SUPPORT.get(name)
