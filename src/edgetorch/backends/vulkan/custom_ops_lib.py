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

prepack_op = torch.ops.et_vk.prepack
conv_with_clamp_op = torch.ops.et_vk.conv_with_clamp
rms_norm_op = torch.ops.et_vk.rms_norm
grid_priors_op = torch.ops.et_vk.grid_priors
