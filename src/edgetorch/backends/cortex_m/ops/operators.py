"""The 23 ``cortex_m::`` operators (ExecuTorch 1.5.1's schemas), for the ahead-of-time half.

Each operator has a functional form, used in graphs until ``to_executorch``, and the ``.out``
form a ``.pte`` calls. The fake (meta) functions fix the output's shape, dtype and memory
format (convolutions and pools give channels-last results, as on the device); the eager
implementations are the reference arithmetic in torch, so an Edge program with these ops
runs eagerly. The runtime's NumPy kernels are in ``edgetorch.kernels.cortex_m``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .arith import (
    SHIFT_INT8,
    SOFTMAX_INPUT_INTEGER_BITS,
    SOFTMAX_SCALE,
    requantize,
    requantize_channels,
)
from .layout import is_channel_broadcast, pad_to_logical

_QDQ = "Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype"
_CONV = ("Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
         "int[] dilation, int input_offset, int output_offset, "
         "Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min, "
         "int activation_max, Tensor scratch")
_DW = ("Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
       "int[] dilation, int depth_multiplier, int input_offset, int output_offset, "
       "Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min, "
       "int activation_max, Tensor scratch")
_TCONV = ("Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
          "int[] output_padding, int[] dilation, int input_offset, int output_offset, "
          "Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min, "
          "int activation_max, Tensor scratch, Tensor output_scratch")
_AVG = ("Tensor input, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, "
        "int zero_point, int multiplier, int shift, Tensor scratch")
_MAX = ("Tensor input, int[] kernel_size, int[] stride, int[] padding, int[] dilation, "
        "bool ceil_mode, int input_zero_point, int output_zero_point, int activation_min, "
        "int activation_max")
# name -> arguments (the .out form adds ``*, Tensor(a!) out``); order of operators.yaml.
SCHEMAS: dict[str, str] = {
    "quantize_per_tensor": _QDQ,
    "dequantize_per_tensor": _QDQ,
    "quantized_add": "Tensor self, int self_zero_point, int self_multiplier, int self_shift, "
                     "Tensor other, int other_zero_point, int other_multiplier, "
                     "int other_shift, int output_zero_point, int output_multiplier, "
                     "int output_shift, int activation_min, int activation_max",
    "quantized_mul": "Tensor self, int self_zero_point, Tensor other, int other_zero_point, "
                     "int output_zero_point, int output_multiplier, int output_shift",
    "quantized_div": "Tensor self, int self_zero_point, Tensor other, int other_zero_point, "
                     "int output_zero_point, float output_scale",
    "quantized_activation": "Tensor input, Tensor lut",
    "minimum": "Tensor self, Tensor other",
    "maximum": "Tensor self, Tensor other",
    "quantized_linear": "Tensor input, Tensor weights, Tensor? bias, Tensor? kernel_sum, "
                        "int input_offset, int filter_offset, int output_offset, "
                        "int[] requantize_multipliers, int[] requantize_shifts, "
                        "int activation_max, int activation_min",
    "softmax": "Tensor input, int dim, int input_zero_point, int output_zero_point, "
               "int input_multiplier, int input_shift, int diff_min",
    "transpose": "Tensor input, int[] perm",
    "pad": "Tensor input, int[] pre_pad, int[] post_pad, int pad_value",
    "quantized_conv2d": _CONV,
    "quantized_conv2d_nhwc": _CONV,
    "quantized_depthwise_conv2d": _DW,
    "quantized_depthwise_conv2d_nhwc": _DW,
    "quantized_transpose_conv2d": _TCONV,
    "quantized_transpose_conv2d_nhwc": _TCONV,
    "quantized_avg_pool2d": _AVG,
    "quantized_avg_pool2d_nhwc": _AVG,
    "quantized_max_pool2d": _MAX,
    "quantized_max_pool2d_nhwc": _MAX,
    "quantized_batch_matmul": "Tensor lhs, int lhs_zero_point, Tensor rhs_transposed, "
                              "int rhs_zero_point, int output_zero_point, "
                              "int output_multiplier, int output_shift, Tensor scratch",
}

_CL = torch.channels_last


def _int8(shape: Sequence[int], like: torch.Tensor, channels_last: bool = True) -> torch.Tensor:
    fmt = _CL if channels_last and len(shape) == 4 else torch.contiguous_format
    return torch.empty(tuple(shape), dtype=torch.int8, device=like.device, memory_format=fmt)


def _pool_out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1,
              ceil: bool = False) -> int:
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pair(v: Sequence[int]) -> tuple[int, int]:
    v = [int(x) for x in v]
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _nchw(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """The ``_nhwc`` form of a spatial op: NHWC logical input and output."""
    def wrapped(input, *args):
        out = fn(input.permute(0, 3, 1, 2).contiguous(), *args)
        return out.permute(0, 2, 3, 1).contiguous()
    return wrapped


def _finish(acc: torch.Tensor, multipliers, shifts, out_offset: int, lo: int, hi: int
            ) -> torch.Tensor:
    out = requantize_channels(acc, multipliers, shifts) + out_offset
    return out.clamp(lo, hi).to(torch.int8, memory_format=_CL)


# --- shapes (fake tensors) ------------------------------------------------------------

def _conv_shape(x, w_hw, c_out, stride, padding, dilation):
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    return (x.shape[0], c_out, _pool_out(x.shape[2], w_hw[0], sh, ph, dh),
            _pool_out(x.shape[3], w_hw[1], sw, pw, dw))


def _fake_conv(x, w, *args):
    stride, padding, dilation = args[1:4]
    return _int8(_conv_shape(x, w.shape[1:3], w.shape[0], stride, padding, dilation), x)


def _fake_dw(x, w, *args):
    stride, padding, dilation = args[1:4]
    return _int8(_conv_shape(x, w.shape[1:3], w.shape[3], stride, padding, dilation), x)


def _fake_tconv(x, w, bias, stride, padding, output_padding, dilation, *rest):
    (sh, sw), (ph, pw) = _pair(stride), _pair(padding)
    (oh, ow), (dh, dw) = _pair(output_padding), _pair(dilation)
    h = (x.shape[2] - 1) * sh - 2 * ph + dh * (w.shape[1] - 1) + oh + 1
    wd = (x.shape[3] - 1) * sw - 2 * pw + dw * (w.shape[2] - 1) + ow + 1
    return _int8((x.shape[0], w.shape[0], h, wd), x)


def _fake_avg(x, kernel, stride, padding, ceil_mode, *rest):
    shape = F.avg_pool2d(torch.empty(x.shape, device="meta"), _pair(kernel), _pair(stride),
                         _pair(padding), ceil_mode, False).shape
    return _int8(shape, x)


def _fake_max(x, kernel, stride, padding, dilation, ceil_mode, *rest):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = map(_pair, (kernel, stride, padding, dilation))
    return _int8((x.shape[0], x.shape[1], _pool_out(x.shape[2], kh, sh, ph, dh),
                  _pool_out(x.shape[3], kw, sw, pw, dw)), x)


def _fake_binary(a, *args):
    b = next(x for x in args if isinstance(x, torch.Tensor))
    if a.shape != b.shape and not is_channel_broadcast(a, b):
        raise ValueError(f"cortex_m: broadcasting only along channels, got {list(a.shape)} "
                         f"and {list(b.shape)}")
    return torch.empty_like(a if a.numel() > b.numel() else b)


def _fake_minmax(a, b):
    if b.numel() == 1:
        return torch.empty_like(a)
    return torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=a.dtype, device=a.device)


def _fake_pad(x, pre, post, value):
    offset = 4 - x.dim()
    pre, post = pad_to_logical(pre, x), pad_to_logical(post, x)
    shape = [s + pre[offset + i] + post[offset + i] for i, s in enumerate(x.shape)]
    out = torch.empty(shape, dtype=x.dtype, device=x.device)
    from .layout import is_channels_last
    return out.to(memory_format=_CL) if is_channels_last(x) else out


FAKE: dict[str, Callable[..., torch.Tensor]] = {
    "quantize_per_tensor": lambda x, s, z, lo, hi, dtype: torch.empty_like(x, dtype=dtype),
    "dequantize_per_tensor": lambda x, *a: torch.empty_like(x, dtype=torch.float),
    "quantized_add": _fake_binary,
    "quantized_mul": _fake_binary,
    "quantized_div": lambda a, za, b, *r: torch.empty_like(a),
    "quantized_activation": lambda x, lut: torch.empty_like(x),
    "minimum": _fake_minmax,
    "maximum": _fake_minmax,
    "quantized_linear": lambda x, w, *r: torch.empty((*x.shape[:-1], w.shape[0]),
                                                     dtype=x.dtype, device=x.device),
    "softmax": lambda x, *r: torch.empty_like(x, dtype=torch.int8),
    "transpose": lambda x, perm: torch.empty([x.shape[p] for p in perm], dtype=x.dtype,
                                             device=x.device),
    "pad": _fake_pad,
    "quantized_conv2d": _fake_conv,
    "quantized_depthwise_conv2d": _fake_dw,
    "quantized_transpose_conv2d": _fake_tconv,
    "quantized_avg_pool2d": _fake_avg,
    "quantized_max_pool2d": _fake_max,
    "quantized_batch_matmul": lambda a, za, b, *r: torch.empty(
        (a.shape[0], a.shape[1], b.shape[1]), dtype=torch.int8, device=a.device),
}


# --- reference arithmetic -------------------------------------------------------------

def _quantize(x, scale, zp, lo, hi, dtype):
    return torch.ops.quantized_decomposed.quantize_per_tensor.default(x, scale, zp, lo, hi, dtype)


def _dequantize(x, scale, zp, lo, hi, dtype):
    return torch.ops.quantized_decomposed.dequantize_per_tensor.default(x, scale, zp, lo, hi,
                                                                        dtype)


def _add(a, za, ma, sa, b, zb, mb, sb, zo, mo, so, lo, hi):
    fa = requantize((a.to(torch.int32) - za) << SHIFT_INT8, ma, sa)
    fb = requantize((b.to(torch.int32) - zb) << SHIFT_INT8, mb, sb)
    return (requantize(fa + fb, mo, so) + zo).clamp(lo, hi).to(torch.int8)


def _mul(a, za, b, zb, zo, mo, so):
    prod = (a.to(torch.int32) - za) * (b.to(torch.int32) - zb)
    return (requantize(prod, mo, so) + zo).clamp(-128, 127).to(torch.int8)


def _div(a, za, b, zb, zo, scale):
    fa = (a.to(torch.int32) - za).to(torch.float32)
    fb = (b.to(torch.int32) - zb).to(torch.float32)
    q = torch.where(fb != 0, fa / fb, torch.zeros_like(fa))
    info = torch.iinfo(a.dtype)
    return (torch.round(q * scale) + zo).clamp(info.min, info.max).to(a.dtype)


def _linear(x, w, bias, kernel_sum, in_off, w_off, out_off, mults, shifts, hi, lo):
    rows = x.reshape(-1, x.shape[-1]).to(torch.int32)
    if kernel_sum is not None:  # CMSIS-NN's MVE path: sum(x)*w_off + precomputed kernel sum
        acc = rows @ w.to(torch.int32).T + rows.sum(-1, keepdim=True) * w_off + kernel_sum
    else:
        acc = (rows + in_off) @ (w.to(torch.int32) + w_off).T
        if bias is not None:
            acc = acc + bias
    acc = acc.reshape(*x.shape[:-1], w.shape[0])
    return (requantize(acc, int(mults[0]), int(shifts[0])) + out_off).clamp(lo, hi).to(torch.int8)


def _softmax(x, dim, in_zp, out_zp, mult, shift, diff_min):
    """ExecuTorch's reference is float (CMSIS-NN's kernel is fixed point; see the runtime)."""
    real = math.ldexp(float(mult) / float(1 << 31), shift)
    scale = real / float(1 << (31 - SOFTMAX_INPUT_INTEGER_BITS))
    p = torch.softmax((x.to(torch.int32) - in_zp).float() * scale, dim=dim)
    return (torch.round(p / SOFTMAX_SCALE) + out_zp).clamp(-128, 127).to(torch.int8)


def _pad(x, pre, post, value):
    offset = 4 - x.dim()
    pre, post = pad_to_logical(pre, x), pad_to_logical(post, x)
    padding = []
    for i in reversed(range(x.dim())):
        padding += [pre[offset + i], post[offset + i]]
    return F.pad(x, padding, mode="constant", value=value)


def _conv(x, w, bias, stride, padding, dilation, in_off, out_off, mults, shifts, lo, hi,
          scratch):
    w_oihw = w.to(torch.int32).permute(0, 3, 1, 2).contiguous()
    b = torch.zeros(w.shape[0], dtype=torch.int32) if bias is None else bias.to(torch.int32)
    acc = F.conv2d(x.to(torch.int32) + in_off, w_oihw, b, tuple(stride), tuple(padding),
                   tuple(dilation), x.shape[1] // w.shape[3])
    return _finish(acc, mults, shifts, out_off, lo, hi)


def _dw(x, w, bias, stride, padding, dilation, mult, in_off, out_off, mults, shifts, lo, hi,
        scratch):
    w_oihw = w.to(torch.int32).permute(3, 0, 1, 2).contiguous()
    b = torch.zeros(w.shape[3], dtype=torch.int32) if bias is None else bias.to(torch.int32)
    acc = F.conv2d(x.to(torch.int32) + in_off, w_oihw, b, tuple(stride), tuple(padding),
                   tuple(dilation), x.shape[1])
    return _finish(acc, mults, shifts, out_off, lo, hi)


def _tconv(x, w, bias, stride, padding, output_padding, dilation, in_off, out_off, mults,
           shifts, lo, hi, scratch, out_scratch):
    # float64 holds every int32 accumulator exactly (conv_transpose2d has no integer kernel)
    w_iohw = w.to(torch.float64).permute(3, 0, 1, 2).contiguous()
    b = torch.zeros(w.shape[0]) if bias is None else bias
    acc = F.conv_transpose2d((x.to(torch.int32) + in_off).to(torch.float64), w_iohw,
                             b.to(torch.float64), tuple(stride), tuple(padding),
                             tuple(output_padding), x.shape[1] // w.shape[3],
                             tuple(dilation)).to(torch.int32)
    return _finish(acc, mults, shifts, out_off, lo, hi)


def _avg(x, kernel, stride, padding, ceil_mode, zp, mult, shift, scratch):
    """ExecuTorch's reference: dequantize with the pair, average, quantize back."""
    scale = mult * (2 ** shift) / (1 << 31)
    y = F.avg_pool2d((x.float() - zp) * scale, _pair(kernel), _pair(stride), _pair(padding),
                     ceil_mode, False)
    return (torch.round(y / scale) + zp).clamp(-128, 127).to(torch.int8)


def _max(x, kernel, stride, padding, dilation, ceil_mode, in_zp, out_zp, lo, hi):
    if ceil_mode:
        raise ValueError("cortex_m::quantized_max_pool2d does not support ceil_mode=True")
    # aten's channels-last int8 max pool refuses images over 127 pixels: pool a contiguous copy
    y = F.max_pool2d(x.to(memory_format=torch.contiguous_format), _pair(kernel), _pair(stride),
                     _pair(padding), _pair(dilation), ceil_mode)
    return y.clamp(lo, hi).to(torch.int8).contiguous(memory_format=_CL)


def _bmm(a, za, b_t, zb, zo, mo, so, scratch):
    acc = torch.bmm((a.to(torch.float64) + za), (b_t.to(torch.float64) + zb).permute(0, 2, 1))
    return (requantize(acc.to(torch.int32), mo, so) + zo).clamp(-128, 127).to(torch.int8)


IMPL: dict[str, Callable[..., torch.Tensor]] = {
    "quantize_per_tensor": _quantize,
    "dequantize_per_tensor": _dequantize,
    "quantized_add": _add,
    "quantized_mul": _mul,
    "quantized_div": _div,
    "quantized_activation": lambda x, lut: lut[x.to(torch.int64) + 128].to(torch.int8),
    "minimum": torch.minimum,
    "maximum": torch.maximum,
    "quantized_linear": _linear,
    "softmax": _softmax,
    "transpose": lambda x, perm: x.permute(tuple(perm)).contiguous(),
    "pad": _pad,
    "quantized_conv2d": _conv,
    "quantized_depthwise_conv2d": _dw,
    "quantized_transpose_conv2d": _tconv,
    "quantized_avg_pool2d": _avg,
    "quantized_max_pool2d": _max,
    "quantized_batch_matmul": _bmm,
}
for _name in list(FAKE):
    if _name.startswith(("quantized_conv2d", "quantized_depthwise", "quantized_transpose_conv",
                         "quantized_avg_pool", "quantized_max_pool")):
        FAKE[_name + "_nhwc"] = _nchw(FAKE[_name])
        IMPL[_name + "_nhwc"] = _nchw(IMPL[_name])

_LIB: torch.library.Library | None = None


def define_ops() -> None:
    """Define every ``cortex_m::`` operator once (both forms, fake and eager kernels)."""
    global _LIB
    if _LIB is not None:
        return
    if hasattr(torch.ops.cortex_m, "quantized_conv2d"):
        raise RuntimeError("another library already defines the cortex_m operators; edgetorch "
                           "defines its own (do not import ExecuTorch in the same process)")
    lib = torch.library.Library("cortex_m", "DEF")
    for name, args in SCHEMAS.items():
        lib.define(f"{name}({args}) -> Tensor")
        lib.define(f"{name}.out({args}, *, Tensor(a!) out) -> Tensor(a!)")
        torch.library.register_fake(f"cortex_m::{name}", FAKE[name], lib=lib)
        lib.impl(name, IMPL[name], "CompositeExplicitAutograd")
        lib.impl(f"{name}.out", _out_variant(IMPL[name]), "CompositeExplicitAutograd")
    _LIB = lib


def _out_variant(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def out_fn(*args, out):
        result = fn(*args)
        out.resize_(result.shape)
        return out.copy_(result)
    return out_fn


define_ops()
