"""What each operator of a ``VkGraph`` computes, for the NumPy interpreter.

An ``OperatorCall`` names its operator as the Edge dialect does (``aten.add.Tensor``) and
passes every schema argument, then the output. Most operators are ATen's: they run the
portable kernel of their out variant (``aten::add.out``), the reference every other edgetorch
path is checked against. Where the out variant drops arguments (a creation op's dtype,
layout and device, which the output tensor's own dtype replaces) ``_KEEP`` says which stay.
The delegate's own operators (``et_vk.*``), the symbolic integer ops and the few ATen ops
without a portable kernel are written here with ``@vk_op``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ....errors import OperatorMissingError, near_matches
from ....kernels import KERNELS
from ....schema.scalar_type import from_numpy_dtype

Handler = Callable[..., Any]  # (*arguments, *outs) -> result or tuple of results

VK_OPS: dict[str, Handler] = {}


def vk_op(*names: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for name in names:
            if name in VK_OPS:
                raise ValueError(f"Vulkan operator {name!r} is registered twice")
            VK_OPS[name] = fn
        return fn
    return deco


# Out variants whose names the ``op.overload`` -> ``op.out`` / ``op.overload_out`` rule misses.
_OUT_NAME = {
    "aten.arange.start_step": "aten::arange.start_out",
    "aten.div.Tensor_mode": "aten::div.out_mode",
    "aten.sum.dim_IntList": "aten::sum.IntList_out",
}
# Functional arguments the out variant keeps (the others are dtype/layout/device/pin_memory).
_KEEP = {
    "aten.full.default": (0, 1),
    "aten.full_like.default": (0, 1, 6),
    "aten.ones.default": (0,),
    "aten.zeros.default": (0,),
    "aten.arange.start_step": (0, 1, 2),
    "aten.scalar_tensor.default": (0,),
    "aten._to_copy.default": (0, 5, 6),
    "dim_order_ops._to_dim_order_copy.default": (0, 5, 6),
}


def out_variant(name: str) -> str | None:
    """The portable kernel for Edge operator ``name`` (``ns.op.overload``), or None."""
    if name in _OUT_NAME:
        return _OUT_NAME[name]
    parts = name.split(".")
    if len(parts) != 3:
        return None
    ns, op, overload = parts
    candidates = [f"{ns}::{op}.out"] if overload == "default" else [
        f"{ns}::{op}.{overload}_out", f"{ns}::{op}.out"]
    return next((c for c in candidates if c in KERNELS), None)


# The graph stores a ScalarType argument as Null: Q/DQ ops take the quantized dtype from the
# tensor that has it (a dequantize's input, a quantize's output).
_QDQ_DTYPE_ARG = {"dequantize_per_tensor": (5, "in"), "dequantize_per_channel": (6, "in"),
                  "dequantize_per_token": (5, "in"), "quantize_per_tensor": (5, "out"),
                  "quantize_per_channel": (6, "out"), "quantize_per_token": (5, "out")}


def _with_qdq_dtype(fn: Handler, index: int, side: str) -> Handler:
    def run(*args):
        if args[index] is None:
            src = args[0] if side == "in" else args[-1]
            args = (*args[:index], int(from_numpy_dtype(src.dtype)), *args[index + 1:])
        return fn(*args)
    return run


def resolve(name: str) -> Handler:
    """The handler of operator ``name``; an operator with none is refused, by name."""
    if name in VK_OPS:
        return VK_OPS[name]
    kernel_name = out_variant(name)
    if kernel_name is not None:
        fn = KERNELS[kernel_name].fn
        parts = name.split(".")
        if parts[0] == "quantized_decomposed" and parts[1] in _QDQ_DTYPE_ARG:
            return _with_qdq_dtype(fn, *_QDQ_DTYPE_ARG[parts[1]])
        keep = _KEEP.get(name)
        if keep is None:
            return fn
        n_out = KERNELS[kernel_name].num_args - len(keep)
        return lambda *args: fn(*[args[i] for i in keep], *args[len(args) - n_out:])
    hint = near_matches(name, list(VK_OPS) + [n.replace("::", ".") for n in KERNELS])
    near = f" Similar: {', '.join(hint)}." if hint else ""
    raise OperatorMissingError(
        f"VulkanBackend: the delegate calls operator {name!r}, which this runtime cannot run.{near}"
        " Lower that operator outside the Vulkan delegate (VulkanPartitioner("
        f"operator_blocklist=[...])), or add it to edgetorch.backends.vulkan.runtime.ops.")


# ---- the delegate's own operators ----------------------------------------------------------

@vk_op("et_vk.prepack.default")
def _prepack(x, out):
    return x  # a constant moved to the GPU at load time: the same values


@vk_op("et_vk.conv_with_clamp.default")
def _conv_with_clamp(x, w, b, stride, padding, dilation, transposed, output_padding, groups,
                     lo, hi, out):
    y = KERNELS["aten::convolution.out"].fn(x, w, b, stride, padding, dilation, transposed,
                                              output_padding, groups, out)
    if lo is None and hi is None:
        return y
    return np.clip(y, lo, hi, out=y if y is out else None)


@vk_op("et_vk.rms_norm.default")
def _rms_norm(x, weight, eps, out):
    x32 = x.astype(np.float32, copy=False)
    rstd = 1.0 / np.sqrt(np.mean(x32 * x32, axis=-1, keepdims=True) + np.float32(eps))
    return x32 * rstd * weight.astype(np.float32, copy=False)


def _dequant_rows(q: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) * scales.astype(np.float32).reshape(-1, 1)


@vk_op("aten._weight_int8pack_mm.default")
def _weight_int8pack_mm(x, weight, scales, out):
    """``x @ (int8 W * per-row scale).T``: the 8-bit weight-only linear."""
    return x.astype(np.float32) @ _dequant_rows(weight, scales).T


@vk_op("et_vk.linear_qcs4w.default")
def _linear_qcs4w(x, packed, scales, out):
    """4-bit weight-only linear: two values a byte (even column high), each stored + 8."""
    p = packed.astype(np.int16)
    w = np.empty((p.shape[0], p.shape[1] * 2), np.int16)
    w[:, 0::2], w[:, 1::2] = (p >> 4) - 8, (p & 0x0F) - 8
    w = w[:, :x.shape[-1]]
    return x.astype(np.float32) @ _dequant_rows(w, scales).T


def _quantize_int8(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """``quantized_decomposed.quantize_per_tensor`` to int8: round half to even of
    ``x * (1 / scale)``, plus the zero point, clamped."""
    inv = np.float32(1.0 / scale)
    q = np.round(x.astype(np.float32) * inv) + np.float32(zero_point)
    return np.clip(q, -128, 127).astype(np.int8)


def _dequantize_int8(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return (q.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)


@vk_op("et_vk.q8ta_linear.default", "et_vk.q8ta_linear_gemv.default")
def _q8ta_linear(x, input_scale, input_zero_point, weights, weight_sums, weight_scales,
                 output_scale, output_zero_point, bias, activation, out):
    """int8 x (per tensor) times int8 W (per output channel) -> int8; ``weight_sums`` only
    serve the GPU's integer accumulation, and scales/bias may be padded past the channels."""
    oc = weights.shape[0]
    w = _dequant_rows(weights, np.asarray(weight_scales)[:oc])
    y = _dequantize_int8(x, input_scale, input_zero_point) @ w.T
    if bias is not None:
        y = y + bias[:oc].astype(np.float32)
    if activation == "relu":
        y = np.maximum(y, np.float32(0))
    return _quantize_int8(y, output_scale, output_zero_point)


@vk_op("et_vk.q8ta_pixel_shuffle.default")
def _q8ta_pixel_shuffle(x, input_scale, input_zero_point, output_inv_scale, output_zero_point,
                        r, out):
    """Pixel shuffle of int8 ``[..., C*r*r, H, W]`` -> ``[..., C, H*r, W*r]``, requantized from
    the input's scale to the output's (given as its inverse)."""
    *lead, c, h, w = x.shape
    y = _dequantize_int8(x, input_scale, input_zero_point)
    y = y.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    y = y.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    y = y.reshape(*lead, c // (r * r), h * r, w * r)
    return _quantize_int8(y, 1.0 / output_inv_scale, output_zero_point)


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    pairs = x.astype(np.float32).reshape(*x.shape[:-1], -1, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    if cos.ndim == 2:  # [seq, d] broadcasts over batch and heads
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    y = np.stack((re * cos - im * sin, re * sin + im * cos), axis=-1)
    return y.reshape(x.shape).astype(x.dtype)


@vk_op("et_vk.apply_rotary_emb.default")
def _apply_rotary_emb(xq, xk, freqs_cos, freqs_sin, out_q, out_k):
    """Llama's RoPE on queries and keys: each (even, odd) pair rotated by (cos, sin)."""
    cos, sin = freqs_cos.astype(np.float32), freqs_sin.astype(np.float32)
    return _rope(xq, cos, sin), _rope(xk, cos, sin)


def _unpack_q4(packed: np.ndarray, even_low: bool) -> np.ndarray:
    low = (packed & 0x0F).astype(np.int8) - 8
    high = (packed >> 4).astype(np.int8) - 8
    pair = (low, high) if even_low else (high, low)
    return np.stack(pair, axis=-1).reshape(packed.shape[0], -1)


@vk_op("et_vk.embedding_q4gsw.default")
def _embedding_q4gsw(weight, weight_scales, group_size, indices, is_linear_weight, out):
    """Rows of a 4-bit table, one scale per ``group_size`` columns (the linear layout keeps
    the even column in the low nibble, the embedding layout in the high one)."""
    rows = weight[np.asarray(indices).reshape(-1)]
    values = _unpack_q4(rows, bool(is_linear_weight)).astype(np.float32)
    scales = np.asarray(weight_scales, np.float32)
    scales = scales.reshape(-1)[:1] if scales.size == 1 else \
        scales.reshape(weight.shape[0], -1)[np.asarray(indices).reshape(-1)]
    n = values.shape[0]
    values = values.reshape(n, -1, group_size) * scales.reshape(scales.shape[0], -1, 1)
    return values.reshape(*np.shape(indices), -1)


def _dequant_q4gsw(weights, weight_scales, group_size, k):
    """The [N, K] float weight of a 4-bit linear: ``weights`` in the linear layout (columns
    padded to 8), ``weight_scales`` [groups, N4] (output channels padded to 4)."""
    w = _unpack_q4(weights, True)[:, :k].astype(np.float32)
    n = w.shape[0]
    scales = np.asarray(weight_scales, np.float32)[:, :n].T  # [N, groups]
    return (w.reshape(n, -1, group_size) * scales[:, :, None]).reshape(n, k)


def _linear_4bit(x, weights, weight_scales, group_size, bias):
    w = _dequant_q4gsw(weights, weight_scales, group_size, x.shape[-1])
    y = x.astype(np.float32) @ w.T
    return y if bias is None else y + np.asarray(bias, np.float32)[:w.shape[0]]


@vk_op("et_vk.linear_q4gsw.default")
def _linear_q4gsw(x, weights, weight_scales, group_size, bias, out):
    """4-bit weight-only linear, one scale per ``group_size`` input channels."""
    return _linear_4bit(x, weights, weight_scales, group_size, bias)


@vk_op("et_vk.linear_dq8ca_q4gsw.default")
def _linear_dq8ca_q4gsw(x, input_scales, input_zp, weights, weight_sums, weight_scales,
                        group_size, bias, out):
    """The 4-bit linear on ``x`` quantized to int8 per row (``input_scales``/``input_zp``)
    and dequantized; ``weight_sums`` only serve the GPU's integer accumulation."""
    rows = x.astype(np.float32).reshape(-1, x.shape[-1])
    scale = np.asarray(input_scales, np.float32).reshape(-1, 1)
    zero = np.asarray(input_zp).astype(np.float32).reshape(-1, 1)
    q = np.clip(np.round(rows * (np.float32(1) / scale)) + zero, -128, 127)
    xq = ((q - zero) * scale).reshape(x.shape)
    return _linear_4bit(xq, weights, weight_scales, group_size, bias)


@vk_op("et_vk.grid_priors.default")
def _grid_priors(x, stride, offset, out):
    """The (x, y) centre of every cell of ``x``'s last two dims, row by row:
    ``(index + offset) * stride``, as float (ExecuTorch's reference kernel)."""
    height, width = x.shape[-2:]
    ys = (np.arange(height, dtype=np.float32) + np.float32(offset)) * np.float32(stride)
    xs = (np.arange(width, dtype=np.float32) + np.float32(offset)) * np.float32(stride)
    yy, xx = np.meshgrid(ys, xs, indexing="ij")
    return np.stack((xx.reshape(-1), yy.reshape(-1)), axis=-1)


# ---- ATen operators without a portable kernel -----------------------------------------------

@vk_op("aten.split_with_sizes_copy.default")
def _split_with_sizes_copy(x, split_sizes, dim, *outs):
    """The graph lists one output tensor per piece; the portable kernel takes them as a list."""
    return tuple(KERNELS["aten::split_with_sizes_copy.out"].fn(x, split_sizes, dim, list(outs)))


@vk_op("aten.max_pool2d.default")
def _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, out):
    indices = np.empty(out.shape, np.int64)
    y, _ = KERNELS["aten::max_pool2d_with_indices.out"].fn(
        x, kernel_size, stride, padding, dilation, ceil_mode, out, indices)
    return y


@vk_op("aten.hardshrink.default")
def _hardshrink(x, lambd, out):
    return np.where(np.abs(x) > lambd, x, np.zeros((), x.dtype))


@vk_op("aten.zeros_like.default")
def _zeros_like(x, dtype, layout, device, pin_memory, memory_format, out):
    return np.zeros(x.shape, out.dtype)


@vk_op("aten.ones_like.default")
def _ones_like(x, dtype, layout, device, pin_memory, memory_format, out):
    return np.ones(x.shape, out.dtype)


@vk_op("aten.permute.default")
def _permute(x, dims, out):
    return np.ascontiguousarray(np.transpose(x, dims))


@vk_op("aten.copy.default")
def _copy(x, src, non_blocking, out):
    return np.broadcast_to(src, x.shape).astype(x.dtype)  # the partitioner admits no-op copies


# ---- symbolic integers (dynamic shapes) -------------------------------------------------------

@vk_op("sym_size.int")
def _sym_size(x, dim, out):
    return int(x.shape[dim])


for _name, _fn in {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
                   "floordiv": operator.floordiv, "lt": operator.lt, "gt": operator.gt,
                   "ge": operator.ge, "le": operator.le, "eq": operator.eq}.items():
    vk_op(_name)(lambda a, b, out, _f=_fn: _f(a, b))


@vk_op("_assert_scalar.default", "sym_constrain_range_for_size.default")
def _assertion(*args):
    return None
