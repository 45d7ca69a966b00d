"""XNNPACK's compile configurations (ExecuTorch's ``backends/xnnpack/utils/configs.py``)."""

from __future__ import annotations

from typing import Any

from ....exir import EdgeCompileConfig, ExecutorchBackendConfig


def get_xnnpack_edge_compile_config(skip_dim_order: bool = False) -> EdgeCompileConfig:
    """The ``EdgeCompileConfig`` ExecuTorch lowers to XNNPACK with: the IR check off (the
    lowered graph holds delegate calls and quantize/dequantize ops)."""
    return EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=skip_dim_order)


def get_transform_passes(additional_passes: list[Any] | None = None) -> list[Any]:
    """The passes run before partitioning, then ``additional_passes``."""
    from .._passes import RemoveNoopExpandCopyPass

    return [RemoveNoopExpandCopyPass(), *(additional_passes or [])]


def get_xnnpack_executorch_backend_config(additional_passes: list[Any] | None = None
                                          ) -> ExecutorchBackendConfig:
    return ExecutorchBackendConfig(passes=list(additional_passes or []),
                                   extract_delegate_segments=True)
