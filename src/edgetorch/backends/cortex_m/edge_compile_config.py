"""The ``to_edge`` configuration the Cortex-M passes need (ExecuTorch's, op for op)."""

from __future__ import annotations

import torch

from ...exir import EdgeCompileConfig

# Lowered by the Cortex-M passes as they are: decomposed, an activation loses its qparams
# and linear becomes a float addmm.
_PRESERVE_OPS = (
    torch.ops.aten.linear.default,
    torch.ops.aten.hardsigmoid.default,
    torch.ops.aten.hardsigmoid_.default,
    torch.ops.aten.hardswish.default,
    torch.ops.aten.hardswish_.default,
    torch.ops.aten.silu.default,
)


def cortex_m_edge_compile_config() -> EdgeCompileConfig:
    # the quantized graphs mix dtypes the Edge verifier refuses
    return EdgeCompileConfig(preserve_ops=list(_PRESERVE_OPS), _check_ir_validity=False)
