"""The ``channels_last`` operator dialect (ExecuTorch's ``backends/transforms/channels_last_ops``).

Each operator reads its activation (argument 0) as a contiguous ``(N, H, W, C)`` tensor and
returns ``(N, H, W, C)`` results: it is the ATen operator it names, run between two permutes.
Layout passes use them to make channels-last regions explicit in a graph
(``ReplaceOpsWithChannelsLastVariants`` brings them in, ``DecomposeChannelsLastPass`` takes
them out again for the CPU); a backend replaces them with its own channels-last kernels.
There are no ``.out`` variants, as in ExecuTorch: an operator of this dialect left in a program
must be delegated or decomposed before ``to_executorch``.

Importing this module defines the operators (``torch.ops.channels_last.*``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

_TO_NCHW = (0, 3, 1, 2)
_TO_NHWC = (0, 2, 3, 1)
_aten = torch.ops.aten

# name -> (schema arguments and results, the ATen operator run on the NCHW activation).
# The schemas are ExecuTorch's: graphs and tests call these operators by them.
OPERATORS: dict[str, tuple[str, Callable[..., object]]] = {
    "convolution": (
        "(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
        "int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor",
        _aten.convolution.default),
    "avg_pool2d": (
        "(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
        "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) "
        "-> Tensor", _aten.avg_pool2d.default),
    "adaptive_avg_pool2d": ("(Tensor input, int[2] output_size) -> Tensor",
                            _aten.adaptive_avg_pool2d.default),
    "upsample_bilinear2d": (
        "(Tensor input, int[]? output_size, bool align_corners, float[]? scale_factors) "
        "-> Tensor", _aten.upsample_bilinear2d.vec),
    "upsample_nearest2d": (
        "(Tensor input, int[]? output_size, float[]? scale_factors) -> Tensor",
        _aten.upsample_nearest2d.vec),
    "max_pool2d_with_indices": (
        "(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
        "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
        _aten.max_pool2d_with_indices.default),
    "max_pool2d": (
        "(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
        "int[2] dilation=1, bool ceil_mode=False) -> Tensor", _aten.max_pool2d.default),
    "grid_sampler_2d": (
        "(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, "
        "bool align_corners) -> Tensor", _aten.grid_sampler_2d.default),
}


def _on_nchw(aten_op: Callable[..., object]) -> Callable[..., object]:
    """``aten_op`` applied to an NHWC activation: permuted to NCHW before, every result
    permuted back (and made contiguous, the dialect's layout) after."""
    def run(input: torch.Tensor, *args: object) -> object:
        result = aten_op(input.permute(_TO_NCHW), *args)
        if isinstance(result, tuple):
            return tuple(r.permute(_TO_NHWC).contiguous() for r in result)
        return result.permute(_TO_NHWC).contiguous()
    return run


def _permute_copy(input: torch.Tensor, dims: list[int]) -> torch.Tensor:
    return _aten.permute_copy.default(input, dims).contiguous()


lib = torch.library.Library("channels_last", "DEF")  # noqa: TOR901 (a dialect of its own)
for _name, (_schema, _aten_op) in OPERATORS.items():
    lib.define(_name + _schema)
    lib.impl(_name, _on_nchw(_aten_op), "CompositeExplicitAutograd")
    torch.library.register_fake(f"channels_last::{_name}", _on_nchw(_aten_op), lib=lib)
lib.define("permute_copy(Tensor input, int[] dims) -> Tensor")  # a data-moving permute
lib.impl("permute_copy", _permute_copy, "CompositeExplicitAutograd")
torch.library.register_fake("channels_last::permute_copy", _permute_copy, lib=lib)
