"""Cortex-M matrix products: CMSIS-NN's ``arm_fully_connected_s8`` and
``arm_batch_matmul_s8`` as ExecuTorch's ``quantized_linear`` / ``quantized_batch_matmul`` call
them (per-tensor ``arm_nn_requantize``, then the output offset and the activation clamp).

``quantized_linear`` has two forms, as CMSIS-NN does: with a ``kernel_sum`` (the MVE kernels of
a Cortex-M55/M85, which precompute ``input_offset * sum(w + filter_offset) + bias`` ahead of
time and ignore ``bias``) the sum is ``kernel_sum + sum(x * w) + filter_offset * sum(x)``;
without one (scalar and DSP kernels) it is ``bias + sum((x + input_offset) * (w +
filter_offset))``. Both are the same integer when the kernel sum was computed as the AOT pass
computes it.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from . import cmsis
from ._common import I64, INT8, INT32, require, require_dtype, require_rank, store

F64 = np.float64


def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer ``a @ b`` through float64 BLAS: exact while partial sums stay below 2^53."""
    return np.rint(a.astype(F64) @ b.astype(F64)).astype(I64)


@kernel("cortex_m::quantized_linear.out")
def quantized_linear_out(input, weights, bias, kernel_sum, input_offset, filter_offset,
                         output_offset, requantize_multipliers, requantize_shifts,
                         activation_max, activation_min, out):
    op = "cortex_m::quantized_linear.out"
    for name, x in (("input", input), ("weights", weights), ("out", out)):
        require_dtype(op, name, x, INT8)
    require_rank(op, "weights", weights, 2)
    out_features, in_features = weights.shape
    require(input.ndim >= 1 and input.shape[-1] == in_features,
            f"{op}: input {list(input.shape)} has no last dim of {in_features} features")
    require(out.shape == (*input.shape[:-1], out_features),
            f"{op}: out has shape {list(out.shape)}, expected "
            f"{[*input.shape[:-1], out_features]}")
    require(len(requantize_multipliers) >= 1 and len(requantize_shifts) >= 1,
            f"{op}: give one requantize multiplier and shift")
    x = input.reshape(-1, in_features).astype(I64)
    w = weights.astype(I64)
    if kernel_sum is not None:
        require_dtype(op, "kernel_sum", kernel_sum, INT32)
        require(kernel_sum.size == out_features, f"{op}: kernel_sum has {kernel_sum.size} "
                f"values for {out_features} outputs")
        acc = (_exact_matmul(x, w.T) + kernel_sum.reshape(1, -1).astype(I64)
               + filter_offset * x.sum(axis=1, keepdims=True))
    else:
        acc = _exact_matmul(x + input_offset, (w + filter_offset).T)
        if bias is not None:
            require_dtype(op, "bias", bias, INT32)
            require(bias.size == out_features, f"{op}: bias has {bias.size} values for "
                    f"{out_features} outputs")
            acc = acc + bias.reshape(1, -1).astype(I64)
    result = cmsis.requantize(cmsis.wrap32(acc), requantize_multipliers[0],
                              requantize_shifts[0]) + output_offset
    result = cmsis.clamp(result, activation_min, activation_max)
    return store(out, result.reshape(out.shape), op)


@kernel("cortex_m::quantized_batch_matmul.out")
def quantized_batch_matmul_out(lhs, lhs_zero_point, rhs_transposed, rhs_zero_point,
                               output_zero_point, output_multiplier, output_shift, scratch, out):
    """``out[b] = lhs[b] @ rhs_transposed[b].T``; the ``*_zero_point`` arguments are CMSIS-NN
    offsets (the AOT pass stores the negated zero points), added as they are."""
    op = "cortex_m::quantized_batch_matmul.out"
    for name, x in (("lhs", lhs), ("rhs_transposed", rhs_transposed), ("out", out)):
        require_dtype(op, name, x, INT8)
        require_rank(op, name, x, 3)
    b, m, k = lhs.shape
    require(rhs_transposed.shape[0] == b and rhs_transposed.shape[2] == k,
            f"{op}: lhs {list(lhs.shape)} and rhs_transposed {list(rhs_transposed.shape)} do "
            "not share batch and inner dims")
    n = rhs_transposed.shape[1]
    require(out.shape == (b, m, n), f"{op}: out has shape {list(out.shape)}, expected "
            f"{[b, m, n]}")
    lhs64 = lhs.astype(I64) + lhs_zero_point
    rhs64 = rhs_transposed.astype(I64) + rhs_zero_point
    acc = np.stack([_exact_matmul(lhs64[i], rhs64[i].T) for i in range(b)]) if b else \
        np.zeros((0, m, n), dtype=I64)
    result = cmsis.requantize(cmsis.wrap32(acc), output_multiplier, output_shift)
    return store(out, cmsis.clamp(result + output_zero_point, -128, 127), op)
