"""The ``et_vk`` operators the Vulkan passes put into graphs, with torch reference kernels
(used to trace, and as the definition of what the delegate computes). Schemas are
ExecuTorch 1.5.1's, so graphs and ``OperatorCall`` names match its files."""

from __future__ import annotations

import torch
import torch.library

NAMESPACE = "et_vk"
lib = torch.library.Library(NAMESPACE, "DEF")


def _define(schema: str, impl=None, key: str = "CompositeExplicitAutograd") -> None:
    lib.define(schema)
    if impl is not None:
        lib.impl(schema.split("(", 1)[0], impl, key)


def _prepack(x: torch.Tensor) -> torch.Tensor:
    # Moves a constant to a GPU tensor at load time: an identity on values.
    return x


def _conv_with_clamp(input, weight, bias=None, stride=1, padding=0, dilation=1,
                     transposed=False, output_padding=0, groups=1, output_min=None,
                     output_max=None):
    out = torch.convolution(input, weight, bias, stride, padding, dilation, transposed,
                            output_padding, groups)
    return torch.clamp(out, output_min, output_max)


def _conv_with_clamp_out(input, weight, bias=None, stride=1, padding=0, dilation=1,
                         transposed=False, output_padding=0, groups=1, output_min=None,
                         output_max=None, *, out):
    out.copy_(_conv_with_clamp(input, weight, bias, stride, padding, dilation, transposed,
                               output_padding, groups, output_min, output_max))
    return out


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps) * weight


def _linear_qcs4w(x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``x @ W.T`` for W int4 per-channel symmetric, stored + 8 two to a byte (the even
    column in the high nibble)."""
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    oc, half = weight.shape
    w = torch.empty((oc, half * 2), dtype=torch.int32, device=weight.device)
    w[:, ::2] = (weight >> 4).to(torch.int32) - 8
    w[:, 1::2] = (weight & 0x0F).to(torch.int32) - 8
    w = w[:, :x.shape[-1]].to(torch.float32) * scales.reshape(-1, 1).to(torch.float32)
    out = torch.nn.functional.linear(x, w.to(x.dtype))
    return out.reshape(shape[:-1] + (oc,))


def _grid_priors(x: torch.Tensor, stride: int, offset: float) -> torch.Tensor:
    """The (x, y) centre of every cell of ``x``'s last two dims, row by row."""
    height, width = x.shape[-2:]
    shift_x = (torch.arange(0, width, device=x.device) + offset) * stride
    shift_y = (torch.arange(0, height, device=x.device) + offset) * stride
    yy, xx = torch.meshgrid([shift_y, shift_x], indexing="ij")
    return torch.stack((xx.reshape(-1), yy.reshape(-1)), dim=-1)


def _grid_priors_out(x: torch.Tensor, stride: int, offset: float, *,
                     out: torch.Tensor) -> torch.Tensor:
    out.copy_(_grid_priors(x, stride, offset))
    return out


def _quantize(x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    """Per-tensor int8 quantization, as ``quantized_decomposed.quantize_per_tensor``."""
    q = torch.round(x * (1.0 / scale)) + zero_point
    return torch.clamp(q, -128, 127).to(torch.int8)


def _q8ta_linear(x, input_scale, input_zero_point, weights, weight_sums, weight_scales,
                 output_scale, output_zero_point, bias=None, activation="none"):
    """int8 activations (per tensor) x int8 weights (per output channel, symmetric) ->
    int8 output. ``weight_sums``, the precomputed per-channel sums for the integer kernel,
    do not change the values; scales and bias may be padded past the output channels."""
    oc = weights.shape[0]
    w = weights.to(torch.float32) * weight_scales[:oc].to(torch.float32).reshape(-1, 1)
    xf = (x.to(torch.float32) - input_zero_point) * input_scale
    out = torch.nn.functional.linear(xf, w)
    if bias is not None:
        out = out + bias[:oc]
    if activation == "relu":
        out = torch.relu(out)
    return _quantize(out, output_scale, output_zero_point)


def _q8ta_pixel_shuffle(x, input_scale, input_zero_point, output_inv_scale, output_zero_point,
                        upscale_factor):
    """Dequantize, pixel-shuffle, requantize (the output scale given as its inverse)."""
    xf = (x.to(torch.float32) - input_zero_point) * input_scale
    y = torch.nn.functional.pixel_shuffle(xf, upscale_factor)
    return _quantize(y, 1.0 / output_inv_scale, output_zero_point)


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Llama's RoPE: each (even, odd) pair of the last dim is a complex number rotated by
    (cos, sin); ``cos``/``sin`` are [seq, head_dim / 2] or [seq, heads, head_dim / 2]."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    if cos.dim() == 2:  # broadcast over batch and heads: [1, seq, 1, head_dim / 2]
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    out = torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1)
    return out.flatten(-2).to(x.dtype)


def _apply_rotary_emb(xq, xk, freqs_cos, freqs_sin):
    return _rotate_pairs(xq, freqs_cos, freqs_sin), _rotate_pairs(xk, freqs_cos, freqs_sin)


def _unpack_q4(weight: torch.Tensor, is_linear_weight: bool) -> torch.Tensor:
    """int4 values stored + 8 two to a byte: a linear weight keeps the even column in the
    low nibble, an embedding table in the high one."""
    high = (weight >> 4).to(torch.int8) - 8
    low = (weight & 0x0F).to(torch.int8) - 8
    first, second = (low, high) if is_linear_weight else (high, low)
    return torch.stack((first, second), dim=-1).reshape(weight.shape[0], -1)


def _embedding_q4gsw(weight, weight_scales, group_size, indices, is_linear_weight=False):
    """Lookup in a 4-bit table with one scale per ``group_size`` columns; ``weight_scales``
    is [rows, groups] (or one scalar)."""
    table = _unpack_q4(weight, is_linear_weight).to(torch.float32)
    rows, cols = table.shape
    scales = weight_scales.to(torch.float32).reshape(-1, 1) if weight_scales.numel() == 1 \
        else weight_scales.to(torch.float32).reshape(rows, -1)
    table = (table.reshape(rows, -1, group_size) * scales.reshape(scales.shape[0], -1, 1))
    return torch.nn.functional.embedding(indices, table.reshape(rows, cols))


def _linear_q4gsw(x, weights, weight_scales, group_size, bias=None):
    """``x @ W.T + bias`` for W int4 with one scale per ``group_size`` input channels:
    ``weights`` packed as linear layers store it (``[N, K8 / 2]``, K padded to 8),
    ``weight_scales`` transposed to ``[groups, N4]``, it and ``bias`` padded to 4 columns."""
    k = x.shape[-1]
    w = _unpack_q4(weights, True)[:, :k].to(torch.float32)
    n = w.shape[0]
    scales = weight_scales[:, :n].transpose(0, 1).to(torch.float32)  # [N, groups]
    w = (w.reshape(n, -1, group_size) * scales.reshape(n, -1, 1)).reshape(n, k)
    out = torch.nn.functional.linear(x, w.to(x.dtype))
    return out if bias is None else out + bias[:n].to(out.dtype)


def _linear_dq8ca_q4gsw(input, input_scales, input_zp, weights, weight_sums, weight_scales,
                        group_size, bias=None):
    """``linear_q4gsw`` on ``input`` quantized to int8 with one scale and zero point per
    row (``input_scales``/``input_zp``, as ``choose_qparams_affine`` gave them) and
    dequantized again. ``weight_sums`` (per group and output channel) only serve the GPU's
    integer accumulation."""
    rows = input.reshape(-1, input.shape[-1]).to(torch.float32)
    scale = input_scales.reshape(-1, 1).to(torch.float32)
    zero = input_zp.reshape(-1, 1).to(torch.float32)
    q = torch.clamp(torch.round(rows * (1.0 / scale)) + zero, -128, 127)
    x = ((q - zero) * scale).reshape(input.shape).to(input.dtype)
    return _linear_q4gsw(x, weights, weight_scales, group_size, bias)


_CONV_ARGS = ("Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
              "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, "
              "Scalar? output_min, Scalar? output_max")

_define("prepack(Tensor x) -> Tensor", _prepack)
_define(f"conv_with_clamp({_CONV_ARGS}) -> Tensor", _conv_with_clamp)
lib.define(f"conv_with_clamp.out({_CONV_ARGS}, *, Tensor(a!) out) -> Tensor(a!)")
lib.impl("conv_with_clamp.out", _conv_with_clamp_out, "CompositeExplicitAutograd")
_define("linear_qcs4w(Tensor self, Tensor weight, Tensor scales) -> Tensor", _linear_qcs4w)
_define("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor", _rms_norm)
_define("grid_priors(Tensor self, int stride, float offset) -> Tensor", _grid_priors)
_define("grid_priors_out(Tensor self, int stride, float offset, *, Tensor(a!) out) -> Tensor(a!)",
        _grid_priors_out)

_Q8TA_LINEAR_ARGS = ("Tensor x, float input_scale, int input_zero_point, Tensor weights, "
                     "Tensor weight_sums, Tensor weight_scales, float output_scale, "
                     "int output_zero_point, Tensor? bias=None, str activation=\"none\"")
_define(f"q8ta_linear({_Q8TA_LINEAR_ARGS}) -> Tensor", _q8ta_linear)
_define(f"q8ta_linear_gemv({_Q8TA_LINEAR_ARGS}) -> Tensor", _q8ta_linear)
_define("q8ta_pixel_shuffle(Tensor input, float input_scale, int input_zero_point, "
        "float output_inv_scale, int output_zero_point, int upscale_factor) -> Tensor",
        _q8ta_pixel_shuffle)
_define("apply_rotary_emb(Tensor xq, Tensor xk, Tensor freqs_cos, Tensor freqs_sin) "
        "-> (Tensor, Tensor)", _apply_rotary_emb)
_define("linear_q4gsw(Tensor self, Tensor weights, Tensor weight_scales, int group_size, "
        "Tensor? bias=None) -> Tensor", _linear_q4gsw)
_define("linear_dq8ca_q4gsw(Tensor input, Tensor input_scales, Tensor input_zp, Tensor weights, "
        "Tensor weight_sums, Tensor weight_scales, int group_size, Tensor? bias=None) -> Tensor",
        _linear_dq8ca_q4gsw)
_define("embedding_q4gsw(Tensor weight, Tensor weight_scales, int group_size, Tensor indices, "
        "bool is_linear_weight=False) -> Tensor", _embedding_q4gsw)

prepack_op = torch.ops.et_vk.prepack
conv_with_clamp_op = torch.ops.et_vk.conv_with_clamp
rms_norm_op = torch.ops.et_vk.rms_norm
grid_priors_op = torch.ops.et_vk.grid_priors
