"""Neural-network kernels: convolution (forward and backward) and normalisation.

The convolutions' algorithms (GEMM, Winograd, depthwise, transposed) are the convolution
package's (``kernels/conv``: ``nchw.py``, chosen by ``dispatch.py``).
"""

from __future__ import annotations

import math

import numpy as np

from ..conv.nchw import by_group, conv, conv_transpose, patches
from ..registry import kernel
from ._util import (
    INT64,
    expand_param,
    finish,
    float_compute,
    into,
    invalid,
    is_float,
    opmath,
    result_type,
)

# ---- convolution -----------------------------------------------------------------------


@kernel("aten::convolution.out")
def convolution_out(input, weight, bias, stride, padding, dilation, transposed,  # noqa: A002
                    output_padding, groups, out):
    nsp = weight.ndim - 2
    if nsp < 1:
        raise invalid(f"convolution: weight must have at least 3 dims, got {list(weight.shape)}")
    x = input
    if x.ndim != nsp + 2:
        raise invalid(f"convolution: input {list(input.shape)} does not match weight "
                      f"{list(weight.shape)}")
    stride = expand_param(stride, nsp, "stride")
    padding = expand_param(padding, nsp, "padding")
    dilation = expand_param(dilation, nsp, "dilation")
    ct = _conv_dtype(x, weight)
    x = x.astype(ct, copy=False)
    w = weight.astype(ct, copy=False)
    if not transposed:
        return finish(conv(x, w, stride, padding, dilation, groups, bias, out), out)
    output_padding = expand_param(output_padding, nsp, "output_padding")
    r = conv_transpose(x, w, stride, padding, dilation, output_padding, groups)
    if bias is not None:
        r = r + bias.astype(ct, copy=False).reshape((1, -1) + (1,) * nsp)
    return finish(r, out)


def _conv_dtype(*xs):
    """Floats compute in their opmath type; integers in int64 (wrapping like torch's)."""
    ct = opmath(result_type(*xs))
    return ct if is_float(ct) else INT64


@kernel("aten::convolution_backward.out")
def convolution_backward_out(grad_output, input, weight, bias_sizes, stride,  # noqa: A002
                             padding, dilation, transposed, output_padding, groups,
                             output_mask, out0, out1, out2):
    """Gradients of ``convolution`` w.r.t. input, weight and bias (``output_mask`` picks;
    an output not asked for is left as it is)."""
    nsp = weight.ndim - 2
    stride = expand_param(stride, nsp, "stride")
    padding = expand_param(padding, nsp, "padding")
    dilation = expand_param(dilation, nsp, "dilation")
    ct = _conv_dtype(grad_output, input, weight)
    gy, x, w = (t.astype(ct, copy=False) for t in (grad_output, input, weight))
    G, K = groups, w.shape[2:]
    results = [out0, out1, out2]
    if output_mask[0]:
        if transposed:
            gx = conv(gy, w, stride, padding, dilation, G)
        else:
            back = [n - ((o - 1) * s - 2 * p + d * (k - 1) + 1) for n, o, s, p, d, k in
                    zip(x.shape[2:], gy.shape[2:], stride, padding, dilation, K)]
            gx = conv_transpose(gy, w, stride, padding, dilation, back, G)
        results[0] = finish(gx, out0)
    if output_mask[1]:
        if transposed:  # dW[c, o, k] = sum x[c, i] * gy[o, i*s + k*d - p]
            gyp = np.pad(gy, [(0, 0), (0, 0)] + [(p, p) for p in padding])
            cols = patches(gyp, K, stride, dilation, x.shape[2:], G)
            gw = np.matmul(by_group(x, G).transpose(0, 2, 1), cols)
        else:  # dW[o, c, k] = sum gy[o, j] * x[c, j*s + k*d - p]
            xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
            cols = patches(xp, K, stride, dilation, gy.shape[2:], G)
            gw = np.matmul(by_group(gy, G).transpose(0, 2, 1), cols)
        results[1] = finish(gw.reshape(w.shape), out1)
    if output_mask[2]:
        results[2] = finish(gy.sum(axis=(0,) + tuple(range(2, gy.ndim))), out2)
    return tuple(results)


# ---- normalisation ---------------------------------------------------------------------


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2) if x.ndim > 1 else (-1,)


def _affine(y, weight, bias, shape, ct):
    if weight is not None:
        y = y * weight.astype(ct, copy=False).reshape(shape)
    if bias is not None:
        y = y + bias.astype(ct, copy=False).reshape(shape)
    return y


def _stat_out(values, out):
    """mean/invstd outputs: kept empty when the program planned them empty (as ExecuTorch)."""
    if out.size == 0 and values.size != 0:
        return out
    return finish(values.reshape(out.shape) if values.size == out.size else values, out)


def _bn_inference(input, weight, bias, running_mean, running_var, eps, out, mean_out, invstd_out):
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    shape = _channel_shape(x)
    mean = running_mean.astype(ct, copy=False)
    with np.errstate(all="ignore"):
        invstd = 1 / np.sqrt(running_var.astype(ct, copy=False) + ct.type(eps))
    alpha = invstd if weight is None else invstd * weight.astype(ct, copy=False)
    beta = -mean * alpha if bias is None else bias.astype(ct, copy=False) - mean * alpha
    y = np.multiply(x, alpha.reshape(shape), out=into(out, x.shape, ct))  # two passes,
    np.add(y, beta.reshape(shape), out=y)  # in place in out when it fits
    return finish(y, out), _stat_out(mean, mean_out), _stat_out(invstd, invstd_out)


@kernel("aten::_native_batch_norm_legit_no_training.out")
def native_batch_norm_legit_no_training_out(input, weight, bias, running_mean,  # noqa: A002
                                            running_var, momentum, eps, out0, out1, out2):
    return _bn_inference(input, weight, bias, running_mean, running_var, eps, out0, out1, out2)


@kernel("aten::_native_batch_norm_legit.out")
def native_batch_norm_legit_out(input, weight, bias, running_mean, running_var,  # noqa: A002
                                training, momentum, eps, out, save_mean, save_invstd):
    if training:
        raise invalid(
            "_native_batch_norm_legit with training=True updates running statistics in place, "
            "which the portable kernels do not do (as in ExecuTorch); export the model in eval() "
            "mode"
        )
    return _bn_inference(input, weight, bias, running_mean, running_var, eps, out, save_mean,
                         save_invstd)


@kernel("aten::_native_batch_norm_legit.no_stats_out")
def native_batch_norm_legit_no_stats_out(input, weight, bias, training, momentum,  # noqa: A002
                                         eps, out, save_mean, save_invstd):
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    axes = (0,) + tuple(range(2, x.ndim))
    n = max(1, math.prod(x.shape[a] for a in axes))
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=axes, keepdims=True) / ct.type(n)
        d = x - mean
        var = np.sum(d * d, axis=axes, keepdims=True) / ct.type(n)
        invstd = 1 / np.sqrt(var + ct.type(eps))
    y = _affine(d * invstd, weight, bias, _channel_shape(x), ct)
    return finish(y, out), _stat_out(mean.reshape(-1), save_mean), \
        _stat_out(invstd.reshape(-1), save_invstd)


@kernel("aten::native_layer_norm.out")
def native_layer_norm_out(input, normalized_shape, weight, bias, eps,  # noqa: A002
                          out0, out1, out2):
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != tuple(normalized_shape) or k > input.ndim:
        raise invalid(f"layer_norm: normalized_shape {list(normalized_shape)} does not match "
                      f"input shape {list(input.shape)}")
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False)
    axes = tuple(range(x.ndim - k, x.ndim))
    n = math.prod(normalized_shape)
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=axes, keepdims=True) / ct.type(n)
        d = x - mean
        var = np.sum(d * d, axis=axes, keepdims=True) / ct.type(n)
        rstd = 1 / np.sqrt(var + ct.type(eps))
        y = np.multiply(d, rstd, out=d)  # d is ours: normalise, scale and shift in place
    if weight is not None:
        y *= weight.astype(ct, copy=False)
    if bias is not None:
        y += bias.astype(ct, copy=False)
    return finish(y, out0), finish(mean, out1), finish(rstd, out2)


@kernel("aten::native_group_norm.out")
def native_group_norm_out(input, weight, bias, N, C, HxW, group, eps,  # noqa: A002
                          out0, out1, out2):
    if C % group:
        raise invalid(f"group_norm: {C} channels are not divisible into {group} groups")
    ct = float_compute(input.dtype)
    x = input.astype(ct, copy=False).reshape(N, group, -1)
    n = x.shape[2]
    with np.errstate(all="ignore"):
        mean = np.sum(x, axis=2, keepdims=True) / ct.type(max(n, 1))
        d = x - mean
        var = np.sum(d * d, axis=2, keepdims=True) / ct.type(max(n, 1))
        rstd = 1 / np.sqrt(var + ct.type(eps))
    y = (d * rstd).reshape(input.shape)
    y = _affine(y, weight, bias, _channel_shape(input), ct)
    return finish(y, out0), finish(mean.reshape(N, group), out1), \
        finish(rstd.reshape(N, group), out2)
